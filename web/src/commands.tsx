import { useEffect, useRef, useState } from "preact/hooks";
import { execd, observe, readLog, runInBackground, type CommandSummary } from "./api";
import { segments } from "./ansi";
import { ErrorBox } from "./errors";
import { usePoll } from "./hooks";
import { brief, size, span, utc } from "./time";
import { Head, Pager } from "./ui";

const pageSize = 15;
/** The most output the page holds for one command; more is read from its end. */
const shownBytes = 1 << 20;
/** How much one read of the output takes. */
const readChunk = 256 << 10;

/** Commands is a sandbox's command history (execd keeps it), each one's output replayable, live while it runs. */
export function Commands(props: { apiKey: string; id: string }) {
  const { apiKey, id } = props;
  const [list, setList] = useState<{ items: CommandSummary[]; total: number } | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const [offset, setOffset] = useState(0);
  const [open, setOpen] = useState<string | null>(null);
  const [script, setScript] = useState("");
  const [runErr, setRunErr] = useState<unknown>(null);

  const load = async () => {
    try {
      setList(await observe(apiKey, execd(id, `/corral/commands?limit=${pageSize}&offset=${offset}`)));
      setErr(null);
    } catch (e) {
      setErr(e);
    }
  };
  // The history is read again every 2 s while the page shows it.
  usePoll(load, 2000, true, [apiKey, id, offset]);

  const run = async (e: Event) => {
    e.preventDefault();
    if (!script.trim()) return;
    setRunErr(null);
    try {
      const cmd = await runInBackground(apiKey, id, script);
      setScript("");
      setOffset(0);
      setOpen(cmd);
      load();
    } catch (e) {
      setRunErr(e);
    }
  };

  const shown = list?.items.find((c) => c.id === open) ?? null;
  return (
    <section aria-labelledby="cmd-title">
      <h2 id="cmd-title">Commands</h2>
      <form class="run" onSubmit={run}>
        <label for="run-cmd">Run</label>
        <input
          id="run-cmd"
          class="mono grow"
          placeholder="ls -la /tmp"
          autocomplete="off"
          spellcheck={false}
          value={script}
          onInput={(e) => setScript((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={!script.trim()}>
          Run
        </button>
      </form>
      {runErr !== null && <ErrorBox error={runErr} what="The command did not start" />}
      {err !== null && <ErrorBox error={err} what="The command history could not be read" />}
      {list && list.total === 0 && <p class="empty">No commands yet. Run one above, or with the SDK or `corral exec`; it appears here.</p>}
      {list && list.items.length > 0 && (
        <table class="listing commands">
          <Head cols={["Command", "Status", "Started", "Took", "Output"]} />
          <tbody>
            {list.items.map((c) => (
              <tr key={c.id} data-command={c.id} class={c.id === open ? "selected" : ""}>
                <td class="mono cmdline">
                  <button type="button" class="link" aria-expanded={c.id === open} onClick={() => setOpen(c.id === open ? null : c.id)}>
                    {c.content || "(empty)"}
                  </button>
                </td>
                <td>
                  <Status c={c} />
                </td>
                <td title={utc(c.started_at)}>{brief(c.started_at)}</td>
                <td>{c.finished_at ? span(Date.parse(c.finished_at) - Date.parse(c.started_at)) : "—"}</td>
                <td>{size(c.output_bytes)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {list && list.total > pageSize && (
        <Pager
          label="command pages"
          where={`${offset + 1}–${Math.min(offset + pageSize, list.total)} of ${list.total}`}
          back="Newer"
          forward="Older"
          canBack={offset > 0}
          canForward={offset + pageSize < list.total}
          onBack={() => setOffset(Math.max(0, offset - pageSize))}
          onForward={() => setOffset(offset + pageSize)}
        />
      )}
      {open && <Output apiKey={apiKey} id={id} cmd={open} summary={shown} />}
    </section>
  );
}

function Status(props: { c: CommandSummary }) {
  const c = props.c;
  if (c.running) return <span class="state running">running</span>;
  if (c.exit_code === 0) return <span class="state ok">exit 0</span>;
  return (
    <span class="state failed" title={c.error}>
      exit {c.exit_code}
    </span>
  );
}


/** Output is one command's combined output, read from the start (or its last MiB), followed while it runs. */
function Output(props: { apiKey: string; id: string; cmd: string; summary: CommandSummary | null }) {
  const { apiKey, id, cmd, summary } = props;
  const [text, setText] = useState("");
  const [from, setFrom] = useState(0);
  const [err, setErr] = useState<unknown>(null);
  const state = useRef({ cursor: -1, decoder: new TextDecoder(), busy: false, done: false, quiet: 0 });
  const pre = useRef<HTMLPreElement>(null);

  useEffect(() => {
    state.current = { cursor: -1, decoder: new TextDecoder(), busy: false, done: false, quiet: 0 };
    setText("");
    setErr(null);
  }, [cmd]);

  const running = summary?.running ?? true;
  const pull = async () => {
    const st = state.current;
    if (st.busy || st.done) return;
    st.busy = true;
    try {
      // Start at the output's last MiB, and skip ahead to it again when
      // the command prints faster than the page reads.
      const total = summary?.output_bytes ?? 0;
      if (st.cursor < 0 || total - st.cursor > shownBytes) {
        const start = Math.max(0, total - shownBytes);
        if (st.cursor >= 0) {
          st.decoder = new TextDecoder();
          setText("");
        }
        st.cursor = start;
        setFrom(start);
      }
      for (let reads = 0; reads < 4; reads++) {
        const { bytes: chunk, next } = await readLog(apiKey, id, cmd, st.cursor, readChunk);
        if (st !== state.current) return;
        if (chunk.length === 0) {
          // A finished command's output settles just after it exits: it
          // is whole once two reads after the exit find nothing new.
          if (!running) st.quiet++;
          break;
        }
        st.cursor = next;
        const add = st.decoder.decode(chunk, { stream: true });
        setText((t) => {
          const all = t + add;
          return all.length > shownBytes ? all.slice(all.length - shownBytes) : all;
        });
        if (chunk.length < readChunk) break;
      }
      if (st.quiet >= 2) st.done = true;
      setErr(null);
    } catch (e) {
      setErr(e);
    } finally {
      st.busy = false;
    }
  };
  usePoll(pull, 1000, true, [cmd, running]);

  // Keep the newest output in view while it grows, unless the reader scrolled up.
  useEffect(() => {
    const el = pre.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }, [text]);

  return (
    <div class="output" aria-live="off">
      <div class="bar">
        <h3 class="mono cmdline">{summary?.content ?? cmd}</h3>
        {summary && <Status c={summary} />}
        {from > 0 && <span class="muted">the last {size(shownBytes)} of {size(summary?.output_bytes ?? 0)}</span>}
      </div>
      {err !== null && <ErrorBox error={err} what="The output could not be read" />}
      <pre ref={pre} class="term-text" data-testid="command-output" tabIndex={0} aria-label="command output">
        {segments(text).map((s, i) =>
          s.cls ? (
            <span key={i} class={s.cls}>
              {s.text}
            </span>
          ) : (
            s.text
          ),
        )}
        {text === "" && !err && <span class="muted">{running ? "(no output yet)" : "(no output)"}</span>}
      </pre>
    </div>
  );
}
