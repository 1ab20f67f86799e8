import { useEffect, useRef, useState } from "preact/hooks";
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import { call, execd, wsProtocol, wsTokenPrefix } from "./api";
import { ErrorBox } from "./errors";

// execd's PTY frames (docs/execd.md): binary, a channel byte first.
const chanStdin = 0x00;
const chanStdout = 0x01;
const chanStderr = 0x02;
const chanReplay = 0x03;

/** TerminalPanel offers a shell in a running sandbox, opened on request. */
export function TerminalPanel(props: { apiKey: string; id: string }) {
  const [open, setOpen] = useState(false);
  return (
    <section aria-labelledby="term-title" class="terminal">
      <div class="bar">
        <h2 id="term-title">Terminal</h2>
        <button type="button" onClick={() => setOpen(!open)}>
          {open ? "Close the terminal" : "Open a terminal"}
        </button>
      </div>
      {open && <TerminalView apiKey={props.apiKey} id={props.id} />}
    </section>
  );
}

/**
 * TerminalView runs a shell in the sandbox (execd's PTY session) over a
 * WebSocket through corral's proxy: the route's token travels as a
 * subprotocol, never in the URL. A dropped connection is made again and
 * the output replayed from where it was cut (what the shell printed
 * meanwhile included); one another client took over is left to it until
 * the user takes it back. Closing the view ends the session.
 */
function TerminalView(props: { apiKey: string; id: string }) {
  const { apiKey, id } = props;
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState("starting");
  const [err, setErr] = useState<unknown>(null);
  const [session, setSession] = useState("");
  // taken is set when another client took the session over (execd's
  // 4001): the view waits for the user rather than taking it back.
  const [taken, setTaken] = useState(false);
  const reattach = useRef<() => void>(() => {});

  useEffect(() => {
    const term = new Terminal({ fontFamily: '"DejaVu Sans Mono", ui-monospace, monospace', fontSize: 14, cursorBlink: true, scrollback: 5000 });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(host.current!);
    fit.fit();
    let ws: WebSocket | null = null;
    let session = "";
    let token = "";
    let offset = 0; // output bytes shown so far
    let closed = false;
    let retry = 0;
    const enc = new TextEncoder();

    const send = (frame: string | Uint8Array) => {
      if (ws?.readyState === WebSocket.OPEN) ws.send(frame);
    };
    const resize = () => send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
    const show = (data: Uint8Array) => {
      term.write(data);
      offset += data.length;
    };
    const connect = (first: boolean) => {
      const q = new URLSearchParams({ since: String(offset) });
      if (!first) q.set("takeover", "1");
      const scheme = location.protocol === "https:" ? "wss:" : "ws:";
      ws = new WebSocket(`${scheme}//${location.host}/v1${execd(id, `/pty/${encodeURIComponent(session)}/ws`)}?${q}`, [wsProtocol, wsTokenPrefix + token]);
      ws.binaryType = "arraybuffer";
      ws.onopen = () => {
        retry = 0;
        setStatus("connected");
        resize();
      };
      ws.onmessage = (e) => {
        if (typeof e.data === "string") {
          const f = JSON.parse(e.data);
          if (f.type === "exit") setStatus(`the shell exited (${f.exit_code})`);
          if (f.type === "error") setErr(new Error(`${f.code ?? "error"}: ${f.message ?? ""}`));
          return;
        }
        const b = new Uint8Array(e.data as ArrayBuffer);
        if (b[0] === chanReplay && b.length >= 9) {
          const at = Number(new DataView(b.buffer, b.byteOffset + 1, 8).getBigUint64(0));
          const data = b.subarray(9);
          if (at + data.length > offset) show(data.subarray(Math.max(0, offset - at)));
        } else if (b[0] === chanStdout || b[0] === chanStderr) {
          show(b.subarray(1));
        }
      };
      ws.onclose = (e) => {
        if (closed) return;
        if (e.code === 1000) {
          setStatus(e.reason || "closed");
          return;
        }
        if (e.code === 4001) {
          setStatus("another client took this terminal over");
          setTaken(true);
          return;
        }
        retry++;
        setStatus(`reconnecting (attempt ${retry})…`);
        setTimeout(() => !closed && connect(false), Math.min(500 * retry, 5000));
      };
    };
    reattach.current = () => {
      setTaken(false);
      setStatus("reconnecting…");
      connect(false);
      term.focus();
    };
    term.onData((d) => {
      const bytes = enc.encode(d);
      const frame = new Uint8Array(bytes.length + 1);
      frame[0] = chanStdin;
      frame.set(bytes, 1);
      send(frame);
    });
    term.onResize(resize);
    const observer = new ResizeObserver(() => fit.fit());
    observer.observe(host.current!);

    (async () => {
      try {
        const ep = await call<{ headers?: Record<string, string> }>(apiKey, "GET", `/sandboxes/${encodeURIComponent(id)}/endpoints/44772?use_server_proxy=true`);
        token = Object.values(ep.headers ?? {})[0] ?? "";
        const s = await call<{ session_id: string }>(apiKey, "POST", execd(id, "/pty"), {});
        session = s.session_id;
        setSession(session);
        if (closed) return;
        connect(true);
        term.focus();
      } catch (e) {
        setErr(e);
        setStatus("failed");
      }
    })();

    return () => {
      closed = true;
      observer.disconnect();
      ws?.close();
      term.dispose();
      if (session) call(apiKey, "DELETE", execd(id, `/pty/${encodeURIComponent(session)}`)).catch(() => {});
    };
  }, [apiKey, id]);

  return (
    <div>
      <p class="muted" role="status" data-testid="term-status">
        {status}{" "}
        {taken && (
          <button type="button" onClick={() => reattach.current()}>
            Take it back
          </button>
        )}
      </p>
      {err !== null && <ErrorBox error={err} what="The terminal failed" />}
      <div class="term" ref={host} data-testid="terminal" data-session={session} />
    </div>
  );
}
