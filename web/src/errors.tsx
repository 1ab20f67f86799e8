import { APIError } from "./api";

/** ErrorBox shows what the API answered (its code and message), or what went wrong on the way. */
export function ErrorBox(props: { error: unknown; what: string }) {
  const e = props.error;
  return (
    <div class="error" role="alert">
      <strong>{props.what}</strong>
      {e instanceof APIError ? (
        <p>
          <code>{e.status}</code> {e.code && <code>{e.code}</code>} {e.message}
          {e.requestId && <span class="rid"> (request {e.requestId})</span>}
        </p>
      ) : (
        <p>{e instanceof Error ? e.message : String(e)}</p>
      )}
    </div>
  );
}
