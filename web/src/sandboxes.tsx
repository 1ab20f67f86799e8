import { useState } from "preact/hooks";
import { call, type SandboxList as List } from "./api";
import { useLive, useNow } from "./hooks";
import { ErrorBox } from "./errors";
import { local, span, utc } from "./time";
import { Head, Pager } from "./ui";

const pageSize = 25;

/** SandboxList is the tenant's sandboxes, kept current from the event stream. */
export function SandboxList(props: { apiKey: string }) {
  const [page, setPage] = useState(1);
  const [filter, setFilter] = useState("");
  const [applied, setApplied] = useState("");
  const now = useNow();
  const {
    data: list,
    err,
    live,
  } = useLive(
    props.apiKey,
    () => {
      const q = new URLSearchParams({ page: String(page), pageSize: String(pageSize) });
      if (applied) q.set("metadata", applied);
      return call<List>(props.apiKey, "GET", "/sandboxes?" + q.toString());
    },
    [page, applied],
    (ev) => ev.type.startsWith("sandbox."),
  );

  return (
    <section aria-labelledby="list-title">
      <div class="bar">
        <h1 id="list-title">Sandboxes</h1>
        <span class={live ? "live on" : "live"} title={live ? "following the event stream" : "not following events; reload to retry"}>
          {live ? "live" : "offline"}
        </span>
        <form
          class="filter"
          role="search"
          onSubmit={(e) => {
            e.preventDefault();
            setPage(1);
            setApplied(filter.trim());
          }}
        >
          <label for="md">Metadata</label>
          <input id="md" placeholder="team=ml,job=42" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
          <button type="submit">Filter</button>
        </form>
      </div>
      {err !== null && <ErrorBox error={err} what="The list could not be read" />}
      {list && list.items.length === 0 && (
        <p class="empty">
          {applied ? "No sandbox has that metadata." : "No sandboxes yet. Create one with "}
          {!applied && <code>corral create --image host</code>}
          {!applied && " or the API; it appears here as it starts."}
        </p>
      )}
      {list && list.items.length > 0 && (
        <table class="sandboxes">
          <Head cols={["ID", "State", "Image", "Isolation", "Age", "Expires in", "Metadata"]} />
          <tbody>
            {list.items.map((sb) => (
              <tr key={sb.id} data-id={sb.id}>
                <td>
                  <a href={"#/sandboxes/" + sb.id} class="mono">
                    {sb.id.slice(0, 8)}
                  </a>
                </td>
                <td>
                  <span class={"state " + sb.status.state.toLowerCase()}>{sb.status.state}</span>
                </td>
                <td class="mono">{sb.image?.uri ?? ""}</td>
                <td>{sb.isolation ?? ""}</td>
                <td title={utc(sb.createdAt)}>{span(now - Date.parse(sb.createdAt))}</td>
                <td title={sb.expiresAt ? `${local(sb.expiresAt)} (${utc(sb.expiresAt)})` : "no expiry"}>
                  {sb.expiresAt ? span(Date.parse(sb.expiresAt) - now) : "—"}
                </td>
                <td class="md">
                  {Object.entries(sb.metadata ?? {}).map(([k, v]) => (
                    <span class="tag" key={k}>
                      {k}={v}
                    </span>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {list && list.pagination.totalPages > 1 && (
        <Pager
          label="pages"
          where={`Page ${list.pagination.page} of ${list.pagination.totalPages} (${list.pagination.totalItems} sandboxes)`}
          back="Previous"
          forward="Next"
          canBack={page > 1}
          canForward={list.pagination.hasNextPage}
          onBack={() => setPage(page - 1)}
          onForward={() => setPage(page + 1)}
        />
      )}
    </section>
  );
}
