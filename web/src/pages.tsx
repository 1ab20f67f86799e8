// The tenant's other resources (snapshots, volumes, templates, webhooks,
// quota) and, for an admin key, API keys and tenants.
import { useEffect, useState } from "preact/hooks";
import { APIError, call } from "./api";
import { useConfirm } from "./dialog";
import { ErrorBox } from "./errors";
import { useLive } from "./hooks";
import { local, utc } from "./time";
import { Head, Pager } from "./ui";

/** useRead reads path now and again when reload is called (no event stream: these change by the user's hand). */
function useRead<T>(apiKey: string, path: string) {
  const [data, setData] = useState<T | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let stale = false;
    call<T>(apiKey, "GET", path)
      .then((d) => {
        if (stale) return;
        setData(d);
        setErr(null);
      })
      .catch((e) => !stale && setErr(e));
    return () => {
      stale = true;
    };
  }, [apiKey, path, tick]);
  return { data, err, reload: () => setTick((t) => t + 1) };
}

/** useAction runs one change at a time, asks before destructive ones, and keeps the error to show. */
function useAction(after: () => void) {
  const [busy, setBusy] = useState("");
  const [failure, setFailure] = useState<{ what: string; error: unknown } | null>(null);
  const [dialog, ask] = useConfirm();
  const run = async (what: string, fn: () => Promise<unknown>) => {
    setBusy(what);
    setFailure(null);
    try {
      const out = await fn();
      after();
      return out;
    } catch (e) {
      setFailure({ what, error: e });
      return undefined;
    } finally {
      setBusy("");
    }
  };
  const shown = (
    <>
      {dialog}
      {failure && <ErrorBox error={failure.error} what={`${failure.what} failed`} />}
    </>
  );
  return { busy, run, shown, ask };
}

type Action = ReturnType<typeof useAction>;

/** Danger is a button for a destructive call: it asks question first, then DELETEs path. */
function Danger(props: { act: Action; apiKey: string; label: string; question: string; path: string }) {
  const { act } = props;
  return (
    <button
      type="button"
      class="danger"
      disabled={!!act.busy}
      onClick={async () => {
        if (await act.ask(props.question, props.label)) act.run(props.label, () => call(props.apiKey, "DELETE", props.path));
      }}
    >
      {props.label}
    </button>
  );
}

function When(props: { at?: string }) {
  return props.at ? (
    <time dateTime={props.at} title={utc(props.at)}>
      {local(props.at)}
    </time>
  ) : (
    <span class="muted">—</span>
  );
}

interface Snapshot {
  id: string;
  sandboxId: string;
  name?: string;
  status: { state: string; message?: string };
  createdAt: string;
}

export function Snapshots(props: { apiKey: string }) {
  const { apiKey } = props;
  const [page, setPage] = useState(1);
  const { data, err, reload } = useLive(
    apiKey,
    () => call<{ items: Snapshot[]; pagination: { totalPages: number; totalItems: number } }>(apiKey, "GET", `/snapshots?page=${page}&pageSize=25`),
    [page],
    (ev) => ev.type.startsWith("snapshot."),
  );
  const act = useAction(reload);
  const [started, setStarted] = useState<string | null>(null);
  return (
    <section aria-labelledby="snap-title">
      <h1 id="snap-title">Snapshots</h1>
      {err !== null && <ErrorBox error={err} what="The snapshots could not be read" />}
      {act.shown}
      {started && (
        <p class="notice" role="status">
          Started <a href={"#/sandboxes/" + started}>{started.slice(0, 8)}</a> from the snapshot.
        </p>
      )}
      {data && data.items.length === 0 && <p class="empty">No snapshots. Take one from a running sandbox's page (Snapshot), or with <code>corral snapshot</code>.</p>}
      {data && data.items.length > 0 && (
        <table class="listing">
          <Head cols={["ID", "Name", "From", "State", "Taken", ""]} />
          <tbody>
            {data.items.map((s) => (
              <tr key={s.id} data-snapshot={s.id}>
                <td class="mono">{s.id.slice(0, 8)}</td>
                <td>{s.name}</td>
                <td>
                  <a class="mono" href={"#/sandboxes/" + s.sandboxId}>
                    {s.sandboxId.slice(0, 8)}
                  </a>
                </td>
                <td>
                  <span class={"state " + s.status.state.toLowerCase()}>{s.status.state}</span>
                  {s.status.message && <span class="muted"> — {s.status.message}</span>}
                </td>
                <td>
                  <When at={s.createdAt} />
                </td>
                <td class="row-actions">
                  <button
                    type="button"
                    disabled={!!act.busy || s.status.state !== "Ready"}
                    onClick={async () => {
                      const sb = (await act.run("Start", () => call(apiKey, "POST", "/sandboxes", { snapshotId: s.id, timeout: 3600, resourceLimits: { cpu: "1", memory: "1Gi" } }))) as
                        | { id: string }
                        | undefined;
                      if (sb) setStarted(sb.id);
                    }}
                  >
                    Start a sandbox
                  </button>
                  <Danger act={act} apiKey={apiKey} label="Delete" question={`Delete snapshot ${s.id}?`} path={`/snapshots/${s.id}`} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data && data.pagination.totalPages > 1 && (
        <Pager
          label="pages"
          where={`Page ${page} of ${data.pagination.totalPages}`}
          back="Previous"
          forward="Next"
          canBack={page > 1}
          canForward={page < data.pagination.totalPages}
          onBack={() => setPage(page - 1)}
          onForward={() => setPage(page + 1)}
        />
      )}
    </section>
  );
}

export function Volumes(props: { apiKey: string }) {
  const { apiKey } = props;
  const { data, err, reload } = useRead<{ items: { name: string; createdAt: string; inUseBy?: string[] }[] }>(apiKey, "/volumes");
  const act = useAction(reload);
  return (
    <section aria-labelledby="vol-title">
      <h1 id="vol-title">Volumes</h1>
      {err !== null && <ErrorBox error={err} what="The volumes could not be read" />}
      {act.shown}
      {data && data.items.length === 0 && (
        <p class="empty">
          No named volumes. A create with a <code>pvc</code> volume makes one (<code>corral create --volume NAME:/data</code>).
        </p>
      )}
      {data && data.items.length > 0 && (
        <table class="listing">
          <Head cols={["Name", "Made", "Mounted by", ""]} />
          <tbody>
            {data.items.map((v) => (
              <tr key={v.name}>
                <td class="mono">{v.name}</td>
                <td>
                  <When at={v.createdAt} />
                </td>
                <td>
                  {(v.inUseBy ?? []).map((id) => (
                    <a key={id} class="mono tag" href={"#/sandboxes/" + id}>
                      {id.slice(0, 8)}
                    </a>
                  ))}
                </td>
                <td class="row-actions">
                  <Danger act={act} apiKey={apiKey} label="Delete" question={`Delete volume ${v.name} and everything in it?`} path={`/volumes/${encodeURIComponent(v.name)}`} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

interface Template {
  name: string;
  description?: string;
  public?: boolean;
  spec: unknown;
  allowOverride?: string[];
  warmPool?: number;
  warmReady?: number;
  updatedAt?: string;
}

export function Templates(props: { apiKey: string }) {
  const { apiKey } = props;
  const { data, err, reload } = useRead<{ items: Template[] }>(apiKey, "/templates");
  const act = useAction(reload);
  return (
    <section aria-labelledby="tpl-title">
      <h1 id="tpl-title">Templates</h1>
      {err !== null && <ErrorBox error={err} what="The templates could not be read" />}
      {act.shown}
      {data && data.items.length === 0 && (
        <p class="empty">
          No templates. <code>PUT /v1/templates/NAME</code> makes one (docs/api.md, Templates).
        </p>
      )}
      {data &&
        data.items.map((t) => (
          <details key={(t.public ? "public/" : "") + t.name} class="card">
            <summary>
              <span class="mono">{t.name}</span> {t.public && <span class="tag">public</span>} <span class="muted">{t.description}</span>
              {t.warmPool ? (
                <span class="tag">
                  warm {t.warmReady ?? 0}/{t.warmPool}
                </span>
              ) : null}
            </summary>
            <p class="muted">
              Overridable: {(t.allowOverride ?? ["env", "metadata"]).join(", ")}. Updated <When at={t.updatedAt} />.
            </p>
            <pre class="detail">{JSON.stringify(t.spec, null, 2)}</pre>
            {!t.public && (
              <Danger act={act} apiKey={apiKey} label="Delete" question={`Delete template ${t.name}?`} path={`/templates/${encodeURIComponent(t.name)}`} />
            )}
          </details>
        ))}
    </section>
  );
}

interface Webhook {
  id: string;
  url: string;
  types: string[];
  description?: string;
  secret?: string;
  createdAt: string;
}

interface Delivery {
  id: number;
  eventId: string;
  eventType: string;
  state: string;
  attempts: number;
  lastStatus?: number;
  lastError?: string;
  nextAttemptAt?: string;
  deliveredAt?: string;
  createdAt: string;
}

export function Webhooks(props: { apiKey: string }) {
  const { apiKey } = props;
  const { data, err, reload } = useRead<{ items: Webhook[] }>(apiKey, "/webhooks");
  const act = useAction(reload);
  const [url, setUrl] = useState("");
  const [types, setTypes] = useState("");
  const [made, setMade] = useState<Webhook | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  return (
    <section aria-labelledby="wh-title">
      <h1 id="wh-title">Webhooks</h1>
      <form
        class="run"
        onSubmit={async (e) => {
          e.preventDefault();
          const w = (await act.run("Subscribe", () =>
            call(apiKey, "POST", "/webhooks", {
              url: url.trim(),
              types: types
                .split(",")
                .map((t) => t.trim())
                .filter(Boolean),
            }),
          )) as Webhook | undefined;
          if (w) {
            setMade(w);
            setUrl("");
            setTypes("");
          }
        }}
      >
        <label for="wh-url">URL</label>
        <input id="wh-url" class="grow" type="url" required placeholder="https://example.com/hooks/corral" value={url} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} />
        <label for="wh-types">Types</label>
        <input id="wh-types" placeholder="sandbox.failed, sandbox.expiring (empty: all)" value={types} onInput={(e) => setTypes((e.target as HTMLInputElement).value)} />
        <button type="submit" disabled={!!act.busy || !url.trim()}>
          Subscribe
        </button>
      </form>
      {act.shown}
      {made?.secret && (
        <p class="notice" role="status">
          Subscribed. Its signing secret, shown this once: <code class="secret">{made.secret}</code>
        </p>
      )}
      {err !== null && <ErrorBox error={err} what="The webhooks could not be read" />}
      {data && data.items.length === 0 && <p class="empty">No webhooks. Subscribe a URL above to receive the tenant's events, signed.</p>}
      {data && data.items.length > 0 && (
        <table class="listing">
          <Head cols={["URL", "Types", "Made", ""]} />
          <tbody>
            {data.items.map((w) => (
              <tr key={w.id}>
                <td class="mono">{w.url}</td>
                <td>{w.types.length ? w.types.join(", ") : <span class="muted">all</span>}</td>
                <td>
                  <When at={w.createdAt} />
                </td>
                <td class="row-actions">
                  <button type="button" aria-expanded={open === w.id} onClick={() => setOpen(open === w.id ? null : w.id)}>
                    Deliveries
                  </button>
                  <button type="button" disabled={!!act.busy} onClick={() => act.run("Ping", () => call(apiKey, "POST", `/webhooks/${w.id}/ping`)).then(() => setOpen(w.id))}>
                    Ping
                  </button>
                  <Danger act={act} apiKey={apiKey} label="Delete" question={`Delete the webhook to ${w.url}? Its delivery log goes with it.`} path={`/webhooks/${w.id}`} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {open && <Deliveries apiKey={apiKey} id={open} key={open + act.busy} />}
    </section>
  );
}

function Deliveries(props: { apiKey: string; id: string }) {
  const { data, err } = useRead<{ items: Delivery[] }>(props.apiKey, `/webhooks/${props.id}/deliveries?limit=100`);
  return (
    <section aria-labelledby="dl-title">
      <h2 id="dl-title">Deliveries</h2>
      {err !== null && <ErrorBox error={err} what="The deliveries could not be read" />}
      {data && data.items.length === 0 && <p class="empty">Nothing delivered yet: events recorded after the subscription are sent to it. Ping sends one now.</p>}
      {data && data.items.length > 0 && (
        <table class="listing">
          <Head cols={["Event", "State", "Attempts", "Last answer", "When"]} />
          <tbody>
            {data.items.map((d) => (
              <tr key={d.id}>
                <td>
                  <code>{d.eventType}</code> <span class="muted mono">{d.eventId}</span>
                </td>
                <td class={d.state === "dead" ? "deny" : ""}>{d.state}</td>
                <td>{d.attempts}</td>
                <td>{d.lastStatus ? <code>{d.lastStatus}</code> : null} {d.lastError}</td>
                <td>
                  <When at={d.deliveredAt ?? d.nextAttemptAt ?? d.createdAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

interface QuotaStatus {
  tenant: string;
  limits: Record<string, string | number>;
  usage: Record<string, string | number>;
}

const quotaRows: [string, string, string][] = [
  ["Running sandboxes", "running", "running"],
  ["Sandboxes", "sandboxes", "sandboxes"],
  ["CPU", "cpu", "cpu"],
  ["Memory", "memory", "memory"],
  ["Creates a minute", "createsPerMinute", "createsLastMinute"],
  ["Volume bytes", "volumeBytes", "volumeBytes"],
  ["Snapshots", "snapshots", ""],
  ["Snapshot bytes", "snapshotBytes", ""],
];

function QuotaTable(props: { q: QuotaStatus }) {
  const { limits, usage } = props.q;
  const bound = (v: string | number | undefined) => (v === undefined || v === 0 || v === "" ? <span class="muted">no bound</span> : String(v));
  return (
    <table class="listing quota">
      <Head cols={["Limit", "Used", "Bound"]} />
      <tbody>
        {quotaRows.map(([label, l, u]) => (
          <tr key={l}>
            <th scope="row">{label}</th>
            <td>{u ? String(usage[u] ?? 0) : <span class="muted">—</span>}</td>
            <td>{bound(limits[l])}</td>
          </tr>
        ))}
        <tr>
          <th scope="row">Over a bound</th>
          <td>{String(usage.queued ?? 0)} queued</td>
          <td>{String(limits.policy ?? "")}</td>
        </tr>
      </tbody>
    </table>
  );
}

export function Quota(props: { apiKey: string }) {
  const { data, err } = useLive(props.apiKey, () => call<QuotaStatus>(props.apiKey, "GET", "/quota"), [], (ev) => ev.type.startsWith("sandbox."));
  return (
    <section aria-labelledby="q-title">
      <h1 id="q-title">Quota{data ? ` of ${data.tenant}` : ""}</h1>
      {err !== null && <ErrorBox error={err} what="The quota could not be read" />}
      {data && <QuotaTable q={data} />}
    </section>
  );
}

interface Key {
  id: string;
  tenant: string;
  name?: string;
  prefix: string;
  admin: boolean;
  createdAt: string;
  revokedAt?: string;
  key?: string;
}

/** isAdmin asks the API whether the key is an admin's (an admin route answers 403 otherwise). */
export async function isAdmin(apiKey: string): Promise<boolean> {
  try {
    await call(apiKey, "GET", "/admin/keys");
    return true;
  } catch (e) {
    if (e instanceof APIError && (e.status === 403 || e.status === 401)) return false;
    return false;
  }
}

export function Admin(props: { apiKey: string }) {
  const { apiKey } = props;
  const keys = useRead<{ items: Key[] }>(apiKey, "/admin/keys");
  const tenants = useRead<{ items: QuotaStatus[] }>(apiKey, "/admin/quotas");
  const act = useAction(keys.reload);
  const [tenant, setTenant] = useState("");
  const [name, setName] = useState("");
  const [admin, setAdmin] = useState(false);
  const [made, setMade] = useState<Key | null>(null);
  return (
    <section aria-labelledby="adm-title">
      <h1 id="adm-title">API keys</h1>
      <form
        class="run"
        onSubmit={async (e) => {
          e.preventDefault();
          const k = (await act.run("Create the key", () => call(apiKey, "POST", "/admin/keys", { tenant: tenant.trim(), name: name.trim(), admin }))) as Key | undefined;
          if (k) {
            setMade(k);
            setName("");
          }
        }}
      >
        <label for="k-tenant">Tenant</label>
        <input id="k-tenant" required value={tenant} onInput={(e) => setTenant((e.target as HTMLInputElement).value)} />
        <label for="k-name">Name</label>
        <input id="k-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <label>
          <input type="checkbox" checked={admin} onChange={(e) => setAdmin((e.target as HTMLInputElement).checked)} /> admin
        </label>
        <button type="submit" disabled={!!act.busy || !tenant.trim()}>
          Create a key
        </button>
      </form>
      {act.shown}
      {made?.key && (
        <p class="notice" role="status">
          Key for {made.tenant}, shown this once: <code class="secret">{made.key}</code>
        </p>
      )}
      {keys.err !== null && <ErrorBox error={keys.err} what="The keys could not be read" />}
      {keys.data && (
        <table class="listing">
          <Head cols={["Prefix", "Tenant", "Name", "Admin", "Made", "Revoked", ""]} />
          <tbody>
            {keys.data.items.map((k) => (
              <tr key={k.id} class={k.revokedAt ? "muted" : ""}>
                <td class="mono">{k.prefix}…</td>
                <td>{k.tenant}</td>
                <td>{k.name}</td>
                <td>{k.admin ? "yes" : ""}</td>
                <td>
                  <When at={k.createdAt} />
                </td>
                <td>
                  <When at={k.revokedAt} />
                </td>
                <td class="row-actions">
                  {!k.revokedAt && (
                    <Danger act={act} apiKey={apiKey} label="Revoke" question={`Revoke key ${k.prefix}… of ${k.tenant}? Requests with it fail at once.`} path={`/admin/keys/${k.id}`} />
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Tenants</h2>
      {tenants.err !== null && <ErrorBox error={tenants.err} what="The tenants could not be read" />}
      {tenants.data && tenants.data.items.length === 0 && <p class="empty">No tenant holds sandboxes or has quotas of its own.</p>}
      {tenants.data?.items.map((q) => (
        <details key={q.tenant} class="card">
          <summary>
            {q.tenant} <span class="muted">{String(q.usage.sandboxes ?? 0)} sandboxes</span>
          </summary>
          <QuotaTable q={q} />
        </details>
      ))}
    </section>
  );
}
