import { useRef, useState } from "preact/hooks";
import { call, type Sandbox } from "./api";
import { Commands } from "./commands";
import { useConfirm } from "./dialog";
import { Egress } from "./egress";
import { ErrorBox } from "./errors";
import { FileBrowser } from "./files";
import { useLive, useNow } from "./hooks";
import { Metrics } from "./metrics";
import { TerminalPanel } from "./terminal";
import { local, span, utc } from "./time";

interface SandboxEvent {
  seq: number;
  time: string;
  type: string;
  state?: string;
  reason?: string;
  message?: string;
  detail?: unknown;
}

export const tabs = ["overview", "commands", "files", "terminal", "network"] as const;
export type Tab = (typeof tabs)[number];
const tabNames: Record<Tab, string> = { overview: "Overview", commands: "Commands", files: "Files", terminal: "Terminal", network: "Egress" };

/** SandboxPage is one sandbox: its status and actions, and tabs for its resources, commands, files, terminal and egress. */
export function SandboxPage(props: { apiKey: string; id: string; tab: Tab }) {
  const { apiKey, id, tab } = props;
  const now = useNow();
  const [actionErr, setActionErr] = useState<{ what: string; error: unknown } | null>(null);
  const [notice, setNotice] = useState<preact.ComponentChildren>(null);
  const [busy, setBusy] = useState("");
  const [dialog, ask] = useConfirm();
  // The event log is read from where the last read ended; egress
  // decisions (the Egress tab's) are skipped, the newest 200 others kept.
  const log = useRef<{ id: string; after: number; events: SandboxEvent[] }>({ id, after: 0, events: [] });
  if (log.current.id !== id) log.current = { id, after: 0, events: [] };
  const { data, err, gone, reload } = useLive(
    apiKey,
    async () => {
      const sb = await call<Sandbox>(apiKey, "GET", `/sandboxes/${id}`);
      const l = log.current;
      for (let i = 0; i < 50; i++) {
        const page = await call<{ items: SandboxEvent[]; next: number }>(apiKey, "GET", `/sandboxes/${id}/events?limit=1000&after=${l.after}`);
        if (log.current !== l) break;
        l.events = l.events.concat(page.items.filter((ev) => !ev.type.startsWith("egress."))).slice(-200);
        l.after = page.next;
        if (page.items.length < 1000) break;
      }
      return { sb, events: l.events };
    },
    [id],
    (ev) => ev.sandboxId === id,
  );

  const act = async (what: string, method: string, path: string, body?: unknown, done?: (answer: any) => preact.ComponentChildren) => {
    setBusy(what);
    setActionErr(null);
    setNotice(null);
    try {
      const answer = await call(apiKey, method, path, body);
      if (done) setNotice(done(answer));
      reload();
    } catch (e) {
      setActionErr({ what, error: e });
    } finally {
      setBusy("");
    }
  };

  if (gone) {
    return (
      <section>
        <h1>Sandbox {id.slice(0, 8)}</h1>
        <p class="empty">
          This sandbox no longer exists (it was deleted or expired). <a href="#/">Back to the list</a>.
        </p>
      </section>
    );
  }
  const sb = data?.sb ?? null;
  const events = data?.events ?? [];
  const state = sb?.status.state ?? "";
  const running = state === "Running";
  const select = (t: Tab) => {
    location.hash = `#/sandboxes/${id}${t === "overview" ? "" : "/" + t}`;
  };
  return (
    <section aria-labelledby="sb-title">
      {dialog}
      <div class="bar">
        <h1 id="sb-title">
          Sandbox <span class="mono">{id}</span>
        </h1>
      </div>
      {err !== null && <ErrorBox error={err} what="The sandbox could not be read" />}
      {sb && (
        <dl class="facts">
          <dt>State</dt>
          <dd>
            <span class={"state " + state.toLowerCase()} data-testid="state">
              {state}
            </span>
            {sb.status.message && <span class="muted"> — {sb.status.message}</span>}
          </dd>
          <dt>Image</dt>
          <dd class="mono">{sb.image?.uri}</dd>
          <dt>Isolation</dt>
          <dd>{sb.isolation}</dd>
          <dt>Created</dt>
          <dd title={utc(sb.createdAt)}>{local(sb.createdAt)}</dd>
          <dt>Expires</dt>
          <dd title={sb.expiresAt ? utc(sb.expiresAt) : ""}>
            {sb.expiresAt ? `${local(sb.expiresAt)} (in ${span(Date.parse(sb.expiresAt) - now)})` : "never"}
          </dd>
          <dt>Metadata</dt>
          <dd data-testid="metadata">
            {Object.entries(sb.metadata ?? {}).map(([k, v]) => (
              <span class="tag" key={k}>
                {k}={v}
              </span>
            ))}
          </dd>
        </dl>
      )}
      {sb && (
        <div class="actions" role="group" aria-label="actions">
          <button type="button" disabled={!!busy || !running} onClick={() => act("Pause", "POST", `/sandboxes/${id}/pause`)}>
            Pause
          </button>
          <button type="button" disabled={!!busy || state !== "Paused"} onClick={() => act("Resume", "POST", `/sandboxes/${id}/resume`)}>
            Resume
          </button>
          <button
            type="button"
            disabled={!!busy || !sb.expiresAt}
            title={sb.expiresAt ? "" : "a sandbox created without a timeout cannot be renewed"}
            onClick={() => act("Renew", "POST", `/sandboxes/${id}/renew-expiration`, { expiresAt: new Date(Date.now() + 30 * 60 * 1000).toISOString() })}
          >
            Renew 30 min
          </button>
          <button
            type="button"
            disabled={!!busy || !running}
            onClick={() =>
              act("Snapshot", "POST", `/sandboxes/${id}/snapshots`, {}, (s: { id: string }) => (
                <>
                  Snapshot <a href="#/snapshots">{s.id.slice(0, 8)}</a> is being taken.
                </>
              ))
            }
          >
            Snapshot
          </button>
          <button
            type="button"
            disabled={!!busy || !running}
            onClick={() =>
              act("Fork", "POST", `/sandboxes/${id}/fork`, { count: 1 }, (f: { sandboxes: Sandbox[] }) => (
                <>
                  Forked into{" "}
                  {f.sandboxes.map((s) => (
                    <a key={s.id} class="mono" href={"#/sandboxes/" + s.id}>
                      {s.id.slice(0, 8)}
                    </a>
                  ))}
                  .
                </>
              ))
            }
          >
            Fork
          </button>
          <button
            type="button"
            class="danger"
            disabled={!!busy}
            onClick={async () => {
              if (await ask(`Kill sandbox ${id}? Its processes and files are gone for good.`, "Kill")) act("Kill", "DELETE", `/sandboxes/${id}`);
            }}
          >
            Kill
          </button>
          <span class="muted busy" aria-live="polite">
            {busy && `${busy}…`}
          </span>
        </div>
      )}
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      {actionErr && <ErrorBox error={actionErr.error} what={`${actionErr.what} failed`} />}
      <div class="tabs" role="tablist" aria-label="sandbox">
        {tabs.map((t) => (
          <button
            key={t}
            type="button"
            role="tab"
            id={"tab-" + t}
            aria-selected={t === tab}
            aria-controls="tab-panel"
            tabIndex={t === tab ? 0 : -1}
            onClick={() => select(t)}
            onKeyDown={(e) => {
              const i = tabs.indexOf(t);
              const to = e.key === "ArrowRight" ? tabs[(i + 1) % tabs.length] : e.key === "ArrowLeft" ? tabs[(i + tabs.length - 1) % tabs.length] : null;
              if (!to) return;
              e.preventDefault();
              select(to);
              queueMicrotask(() => document.getElementById("tab-" + to)?.focus());
            }}
          >
            {tabNames[t]}
          </button>
        ))}
      </div>
      <div id="tab-panel" role="tabpanel" aria-labelledby={"tab-" + tab} class="panel">
        {tab === "overview" && (
          <>
            <Metrics apiKey={apiKey} id={id} running={running} />
            <h2>Events</h2>
            {events.length === 0 ? (
              <p class="empty">No events yet.</p>
            ) : (
              <ol class="events">
                {events
                  .slice()
                  .reverse()
                  .map((ev) => (
                    <li key={ev.seq}>
                      <time dateTime={ev.time} title={utc(ev.time)}>
                        {local(ev.time)}
                      </time>{" "}
                      <code>{ev.type}</code> {ev.state && <span class="muted">{ev.state}</span>} {ev.message}
                      {ev.detail !== undefined && <pre class="detail">{JSON.stringify(ev.detail)}</pre>}
                    </li>
                  ))}
              </ol>
            )}
          </>
        )}
        {tab !== "overview" && tab !== "network" && !running && (
          <p class="empty">The sandbox is {state ? state.toLowerCase() : "not running"}: its {tabNames[tab].toLowerCase()} are reachable while it runs.</p>
        )}
        {tab === "commands" && running && <Commands apiKey={apiKey} id={id} />}
        {tab === "files" && running && <FileBrowser apiKey={apiKey} id={id} />}
        {tab === "terminal" && running && <TerminalPanel apiKey={apiKey} id={id} />}
        {tab === "network" && <Egress apiKey={apiKey} id={id} />}
      </div>
    </section>
  );
}
