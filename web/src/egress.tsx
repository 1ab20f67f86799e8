import { useRef, useState } from "preact/hooks";
import { call } from "./api";
import { ErrorBox } from "./errors";
import { usePoll } from "./hooks";
import { brief, utc } from "./time";
import { Head, Pager } from "./ui";

interface Decision {
  seq: number;
  time: string;
  type: string;
  reason?: string;
  message?: string;
  detail?: { kind?: string; target?: string; protocol?: string; name?: string; decision?: string; rule?: string; addrs?: string[] };
}

/** The most decisions the page keeps (the server keeps a sandbox's newest 10 000). */
const keep = 10000;
const pageSize = 50;

/** Egress is a sandbox's egress audit: every DNS answer and new connection, allowed or denied, with the rule that decided. */
export function Egress(props: { apiKey: string; id: string }) {
  const { apiKey, id } = props;
  const [items, setItems] = useState<Decision[]>([]);
  const [err, setErr] = useState<unknown>(null);
  const [show, setShow] = useState<"all" | "allow" | "deny">("all");
  const [page, setPage] = useState(0);
  const after = useRef(0);
  const busy = useRef(false);

  usePoll(
    async () => {
      if (busy.current) return;
      busy.current = true;
      try {
        let got: Decision[] = [];
        for (let i = 0; i < 20; i++) {
          const r = await call<{ items: Decision[]; next?: number }>(apiKey, "GET", `/sandboxes/${id}/events?type=egress&limit=1000&after=${after.current}`);
          got = got.concat(r.items);
          if (r.items.length) after.current = r.items[r.items.length - 1].seq;
          if (r.items.length < 1000) break;
        }
        if (got.length) setItems((old) => old.concat(got).slice(-keep));
        setErr(null);
      } catch (e) {
        setErr(e);
      } finally {
        busy.current = false;
      }
    },
    3000,
    true,
    [apiKey, id],
  );

  const decided = (d: Decision) => d.detail?.decision ?? d.reason ?? "";
  const names = new Map<string, { allow: number; deny: number }>();
  for (const d of items) {
    if (d.detail?.kind !== "dns" || !d.detail.target) continue;
    const n = names.get(d.detail.target) ?? { allow: 0, deny: 0 };
    if (decided(d) === "allow") n.allow++;
    else if (decided(d) === "deny") n.deny++;
    names.set(d.detail.target, n);
  }
  const shown = items.filter((d) => show === "all" || decided(d) === show).reverse();
  const pages = Math.max(1, Math.ceil(shown.length / pageSize));
  const at = Math.min(page, pages - 1);
  const denied = items.filter((d) => decided(d) === "deny").length;

  return (
    <section aria-labelledby="egress-title">
      <h2 id="egress-title">Egress audit</h2>
      {err !== null && <ErrorBox error={err} what="The egress audit could not be read" />}
      {items.length === 0 ? (
        <p class="empty">
          No egress decisions yet: nothing in this sandbox has looked up a name or opened a connection out. A sandbox created without a
          <code> networkPolicy</code> has no network at all.
        </p>
      ) : (
        <>
          <p>
            {items.length} decisions, <strong>{denied}</strong> denied.
          </p>
          <h3>Names looked up</h3>
          <table class="listing names">
            <Head cols={["Name", "Allowed", "Denied"]} />
            <tbody>
              {[...names.entries()]
                .sort((a, b) => b[1].deny + b[1].allow - (a[1].deny + a[1].allow))
                .slice(0, 50)
                .map(([name, n]) => (
                  <tr key={name}>
                    <td class="mono">{name}</td>
                    <td>{n.allow}</td>
                    <td class={n.deny ? "deny" : ""}>{n.deny}</td>
                  </tr>
                ))}
            </tbody>
          </table>
          <div class="bar">
            <h3>Decisions</h3>
            <div role="radiogroup" aria-label="show" class="seg">
              {(["all", "allow", "deny"] as const).map((v) => (
                <label key={v}>
                  <input
                    type="radio"
                    name="egress-show"
                    checked={show === v}
                    onChange={() => {
                      setShow(v);
                      setPage(0);
                    }}
                  />
                  {v === "all" ? "All" : v === "allow" ? "Allowed" : "Denied"}
                </label>
              ))}
            </div>
          </div>
          <table class="listing decisions">
            <Head cols={["Time", "Kind", "Target", "Decision", "Rule"]} />
            <tbody>
              {shown.slice(at * pageSize, (at + 1) * pageSize).map((d) => (
                <tr key={d.seq} data-decision={decided(d)}>
                  <td title={utc(d.time)}>{brief(d.time)}</td>
                  <td>{d.detail?.kind ?? d.type}</td>
                  <td class="mono">
                    {d.detail?.target}
                    {d.detail?.name && d.detail.name !== d.detail.target && <span class="muted"> ({d.detail.name})</span>}
                    {d.detail?.addrs?.length ? <span class="muted"> → {d.detail.addrs.join(", ")}</span> : null}
                  </td>
                  <td class={decided(d) === "deny" ? "deny" : "allow"}>{decided(d)}</td>
                  <td>{d.detail?.rule ?? d.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {pages > 1 && (
            <Pager
              label="decision pages"
              where={`Page ${at + 1} of ${pages}`}
              back="Newer"
              forward="Older"
              canBack={at > 0}
              canForward={at < pages - 1}
              onBack={() => setPage(at - 1)}
              onForward={() => setPage(at + 1)}
            />
          )}
        </>
      )}
    </section>
  );
}
