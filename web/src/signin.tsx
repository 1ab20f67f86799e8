import { useState } from "preact/hooks";
import { APIError, call } from "./api";
import { ErrorBox } from "./errors";

/** SignIn asks for an API key and keeps it only once the API accepts it. */
export function SignIn(props: { onKey: (key: string) => void }) {
  const [key, setKey] = useState("");
  const [err, setErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr(null);
    try {
      await call(key.trim(), "GET", "/sandboxes?pageSize=1");
      props.onKey(key.trim());
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <form onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">corral</h1>
        <p>Sign in with an API key. It stays in this tab (session storage) and is sent only to this server's API.</p>
        <label for="key">API key</label>
        <input
          id="key"
          name="key"
          type="password"
          autocomplete="off"
          required
          value={key}
          onInput={(e) => setKey((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy || key.trim() === ""}>
          {busy ? "Checking…" : "Sign in"}
        </button>
        {err !== null && <ErrorBox error={err} what="The key was not accepted" />}
        {err instanceof APIError && err.status === 401 && <p class="hint">Keys are made with `corral keys create`.</p>}
      </form>
    </main>
  );
}
