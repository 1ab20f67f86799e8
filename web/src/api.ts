// The console's only way to corral: same-origin fetches to the API with
// the key in its header (never in a URL or a cookie).

export const keyHeader = "OPEN-SANDBOX-API-KEY";
/** A browser's WebSocket carries the proxy route's token as a subprotocol (api.WSProtocol, api.WSTokenPrefix). */
export const wsProtocol = "corral";
export const wsTokenPrefix = "corral.token.";
const keyItem = "corral.apiKey";

export function savedKey(): string | null {
  return sessionStorage.getItem(keyItem);
}

export function saveKey(key: string | null) {
  if (key === null) sessionStorage.removeItem(keyItem);
  else sessionStorage.setItem(keyItem, key);
}

/** An answer of the API that is not a success, as the API said it. */
export class APIError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string | null,
  ) {
    super(message);
  }
}

export interface Sandbox {
  id: string;
  image?: { uri: string };
  status: { state: string; reason?: string; message?: string };
  metadata?: Record<string, string>;
  entrypoint: string[];
  expiresAt?: string;
  createdAt: string;
  isolation?: string;
}

export interface SandboxList {
  items: Sandbox[];
  pagination: { page: number; pageSize: number; totalItems: number; totalPages: number; hasNextPage: boolean };
}

export interface CorralEvent {
  id: string;
  type: string;
  time: string;
  sandboxId?: string;
  source: string;
  state?: string;
  reason?: string;
  message?: string;
  metadata?: Record<string, string>;
}

function headers(key: string, json: boolean): Record<string, string> {
  const h: Record<string, string> = { [keyHeader]: key, Accept: "application/json" };
  if (json) h["Content-Type"] = "application/json";
  return h;
}

async function failure(res: Response): Promise<APIError> {
  let code = "";
  let message = res.statusText || `HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (typeof body?.code === "string") code = body.code;
    if (typeof body?.message === "string") message = body.message;
  } catch {
    // not JSON: the status says it
  }
  return new APIError(res.status, code, message, res.headers.get("X-Request-ID"));
}

/** execd is the path, under /v1, of a route of a sandbox's execd, through corral's proxy. */
export function execd(id: string, path: string): string {
  return `/sandboxes/${encodeURIComponent(id)}/proxy/44772${path}`;
}

export interface FileInfo {
  path: string;
  type: string;
  size: number;
  modified_at: string;
}

/** download reads a file of a sandbox (through corral's proxy) as a Blob. */
export async function download(key: string, id: string, path: string): Promise<Blob> {
  const res = await fetch("/v1" + execd(id, "/files/download?" + new URLSearchParams({ path })), {
    headers: { [keyHeader]: key },
    credentials: "omit",
    cache: "no-store",
  });
  if (!res.ok) throw await failure(res);
  return res.blob();
}

/**
 * upload writes a file into a sandbox, reporting progress (XMLHttpRequest:
 * fetch reports none for a request body).
 */
export function upload(key: string, id: string, path: string, file: File, onProgress: (sent: number, total: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    form.append("metadata", new Blob([JSON.stringify({ path, mode: 0o644 })], { type: "application/json" }), "metadata");
    form.append("file", file, "file");
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/v1" + execd(id, "/files/upload"));
    xhr.setRequestHeader(keyHeader, key);
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onerror = () => reject(new Error("the upload failed on the way (network)"));
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let code = "";
      let message = xhr.statusText || `HTTP ${xhr.status}`;
      try {
        const body = JSON.parse(xhr.responseText);
        if (typeof body?.code === "string") code = body.code;
        if (typeof body?.message === "string") message = body.message;
      } catch {
        // not JSON
      }
      reject(new APIError(xhr.status, code, message, xhr.getResponseHeader("X-Request-ID")));
    };
    xhr.send(form);
  });
}

/** observeHeader marks a read that only watches: it wakes, resumes and renews nothing (api.HeaderObserve). */
export const observeHeader = "Corral-Observe";

/** observe is a GET under /v1 that only watches (metrics, command history): JSON back. */
export async function observe<T>(key: string, path: string): Promise<T> {
  const res = await fetch("/v1" + path, {
    headers: { ...headers(key, false), [observeHeader]: "1" },
    credentials: "omit",
    cache: "no-store",
  });
  if (!res.ok) throw await failure(res);
  return (await res.json()) as T;
}

export interface CommandSummary {
  id: string;
  content: string;
  running: boolean;
  exit_code?: number;
  error?: string;
  started_at: string;
  finished_at?: string;
  background: boolean;
  output_bytes: number;
}

/** readLog reads at most limit bytes of a command's combined output from a byte cursor: the bytes and the next cursor. */
export async function readLog(key: string, id: string, cmd: string, cursor: number, limit: number): Promise<{ bytes: Uint8Array; next: number }> {
  const res = await fetch("/v1" + execd(id, `/command/${encodeURIComponent(cmd)}/logs?cursor=${cursor}&limit=${limit}`), {
    headers: { [keyHeader]: key, [observeHeader]: "1" },
    credentials: "omit",
    cache: "no-store",
  });
  if (!res.ok) throw await failure(res);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const next = Number(res.headers.get("EXECD-COMMANDS-TAIL-CURSOR") ?? cursor + bytes.length);
  return { bytes, next };
}

/** runInBackground starts a command in a sandbox (execd's background mode) and answers its id. */
export async function runInBackground(key: string, id: string, command: string): Promise<string> {
  const res = await fetch("/v1" + execd(id, "/command"), {
    method: "POST",
    headers: headers(key, true),
    body: JSON.stringify({ command, background: true }),
    credentials: "omit",
    cache: "no-store",
  });
  if (!res.ok) throw await failure(res);
  const text = await res.text();
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    try {
      const ev = JSON.parse(line.slice(5));
      if (ev.type === "init" && typeof ev.text === "string") return ev.text;
      if (ev.type === "error") throw new Error(`the command did not start: ${ev.error?.evalue ?? "unknown error"}`);
    } catch (e) {
      if (e instanceof Error && e.message.startsWith("the command")) throw e;
    }
  }
  throw new Error("execd answered no command id");
}

/** call sends one API request under /v1 with the key. */
export async function call<T>(key: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch("/v1" + path, {
    method,
    headers: headers(key, body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  if (!res.ok) throw await failure(res);
  const text = await res.text(); // some answers (execd's deletes) have no body
  return (text === "" ? undefined : JSON.parse(text)) as T;
}

/**
 * followEvents reads the tenant's event stream (Server-Sent Events, read
 * with fetch because EventSource cannot send the key's header) and calls
 * onEvent for each, reconnecting after the last id it read until signal
 * aborts.
 */
export async function followEvents(key: string, signal: AbortSignal, onEvent: (ev: CorralEvent) => void, onError: (e: unknown) => void) {
  let last = "";
  while (!signal.aborted) {
    try {
      const h = headers(key, false);
      h.Accept = "text/event-stream";
      if (last) h["Last-Event-ID"] = last;
      const res = await fetch("/v1/events", { headers: h, signal, credentials: "omit", cache: "no-store" });
      if (!res.ok || !res.body) throw await failure(res);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let end: number;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          let data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("data:")) data += line.slice(5).trimStart();
            else if (line.startsWith("id:")) last = line.slice(3).trim();
          }
          if (data) {
            try {
              onEvent(JSON.parse(data) as CorralEvent);
            } catch {
              // a line that is not an event: skipped
            }
          }
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      onError(e);
      if (e instanceof APIError && e.status < 500 && e.status !== 429) return;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}
