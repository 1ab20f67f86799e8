import { useEffect, useState } from "preact/hooks";
import { call, download, execd, upload, type FileInfo } from "./api";
import { ErrorBox } from "./errors";
import { local, size, utc } from "./time";
import { useConfirm } from "./dialog";
import { Head } from "./ui";

const shown = 200;

function parent(dir: string): string {
  const i = dir.replace(/\/+$/, "").lastIndexOf("/");
  return i <= 0 ? "/" : dir.slice(0, i);
}

function join(dir: string, name: string): string {
  return dir.replace(/\/+$/, "") + "/" + name;
}

function base(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}


/** FileBrowser lists a running sandbox's directories and moves files in and out. */
export function FileBrowser(props: { apiKey: string; id: string }) {
  const { apiKey, id } = props;
  const [dir, setDir] = useState("/tmp");
  const [typed, setTyped] = useState("/tmp");
  const [items, setItems] = useState<FileInfo[] | null>(null);
  const [more, setMore] = useState(false);
  const [err, setErr] = useState<{ what: string; error: unknown } | null>(null);
  const [progress, setProgress] = useState<{ name: string; sent: number; total: number } | null>(null);
  const [tick, setTick] = useState(0);
  const [dialog, ask] = useConfirm();

  useEffect(() => {
    let stale = false;
    setItems(null);
    call<FileInfo[]>(apiKey, "GET", execd(id, "/directories/list?" + new URLSearchParams({ path: dir })))
      .then((l) => {
        if (stale) return;
        l.sort((a, b) => (a.type === "directory" ? 0 : 1) - (b.type === "directory" ? 0 : 1) || a.path.localeCompare(b.path));
        setItems(l);
        setErr(null);
      })
      .catch((e) => !stale && setErr({ what: `${dir} could not be listed`, error: e }));
    return () => {
      stale = true;
    };
  }, [apiKey, id, dir, tick]);

  const go = (d: string) => {
    setDir(d);
    setTyped(d);
    setMore(false);
    setTick((t) => t + 1); // Open reads the directory again, the same one too
  };
  const save = async (f: FileInfo) => {
    try {
      const blob = await download(apiKey, id, f.path);
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = base(f.path);
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    } catch (e) {
      setErr({ what: `${f.path} could not be downloaded`, error: e });
    }
  };
  const remove = async (f: FileInfo) => {
    if (!(await ask(`Delete ${f.path}? It cannot be brought back.`, "Delete"))) return;
    try {
      await call(apiKey, "DELETE", execd(id, "/files?" + new URLSearchParams({ path: f.path })));
      setTick((t) => t + 1);
    } catch (e) {
      setErr({ what: `${f.path} could not be deleted`, error: e });
    }
  };
  const put = async (e: Event) => {
    const input = e.target as HTMLInputElement;
    const file = input.files?.[0];
    if (!file) return;
    const to = join(dir, file.name);
    setProgress({ name: file.name, sent: 0, total: file.size });
    try {
      await upload(apiKey, id, to, file, (sent, total) => setProgress({ name: file.name, sent, total }));
      setTick((t) => t + 1);
    } catch (e) {
      setErr({ what: `${file.name} could not be uploaded`, error: e });
    } finally {
      setProgress(null);
      input.value = "";
    }
  };

  const list = items ?? [];
  return (
    <section aria-labelledby="files-title" class="files">
      <h2 id="files-title">Files</h2>
      {dialog}
      <form
        class="bar"
        onSubmit={(e) => {
          e.preventDefault();
          go(typed.trim() || "/");
        }}
      >
        <label for="dir">Directory</label>
        <input id="dir" class="mono" value={typed} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} />
        <button type="submit">Open</button>
        <button type="button" disabled={dir === "/"} onClick={() => go(parent(dir))}>
          Up
        </button>
        <label class="upload">
          Upload a file
          <input type="file" onChange={put} disabled={!!progress} />
        </label>
      </form>
      {progress && (
        <p class="progress">
          Uploading {progress.name}: <progress max={progress.total} value={progress.sent} /> {size(progress.sent)} of {size(progress.total)}
        </p>
      )}
      {err && <ErrorBox error={err.error} what={err.what} />}
      {items && list.length === 0 && <p class="empty">{dir} is empty. Upload a file, or open another directory.</p>}
      {list.length > 0 && (
        <table class="listing">
          <Head cols={["Name", "Size", "Modified", ""]} />
          <tbody>
            {list.slice(0, more ? list.length : shown).map((f) => (
              <tr key={f.path} data-path={f.path}>
                <td class="mono">
                  {f.type === "directory" ? (
                    <button type="button" class="link" onClick={() => go(f.path)}>
                      {base(f.path)}/
                    </button>
                  ) : (
                    base(f.path)
                  )}
                </td>
                <td>{f.type === "directory" ? "" : size(f.size)}</td>
                <td title={utc(f.modified_at)}>{local(f.modified_at)}</td>
                <td class="row-actions">
                  {f.type !== "directory" && (
                    <button type="button" onClick={() => save(f)} aria-label={`Download ${base(f.path)}`}>
                      Download
                    </button>
                  )}
                  <button type="button" class="danger" onClick={() => remove(f)} aria-label={`Delete ${base(f.path)}`}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {!more && list.length > shown && (
        <button type="button" onClick={() => setMore(true)}>
          Show all {list.length}
        </button>
      )}
    </section>
  );
}
