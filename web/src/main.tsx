import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { savedKey, saveKey } from "./api";
import { SignIn } from "./signin";
import { SandboxList } from "./sandboxes";
import { SandboxPage, tabs, type Tab } from "./sandbox";
import { Admin, isAdmin, Quota, Snapshots, Templates, Volumes, Webhooks } from "./pages";

const sections = ["snapshots", "volumes", "templates", "webhooks", "quota", "admin"] as const;
type Section = (typeof sections)[number];
type Route = { page: "list" } | { page: "sandbox"; id: string; tab: Tab } | { page: Section };

// route is the page the location's hash names: #/ (the list),
// #/sandboxes/ID[/TAB], or #/SECTION.
function route(): Route {
  const m = location.hash.match(/^#\/sandboxes\/([0-9a-fA-F-]{1,64})(?:\/([a-z]+))?$/);
  if (m) {
    const tab = (tabs as readonly string[]).includes(m[2] ?? "") ? (m[2] as Tab) : "overview";
    return { page: "sandbox", id: m[1], tab };
  }
  const s = location.hash.replace(/^#\//, "");
  if ((sections as readonly string[]).includes(s)) return { page: s as Section };
  return { page: "list" };
}

const names: Record<Section, string> = {
  snapshots: "Snapshots",
  volumes: "Volumes",
  templates: "Templates",
  webhooks: "Webhooks",
  quota: "Quota",
  admin: "Admin",
};

function App() {
  const [key, setKey] = useState<string | null>(savedKey());
  const [where, setWhere] = useState(route());
  const [admin, setAdmin] = useState(false);
  useEffect(() => {
    let was = route();
    const on = () => {
      const now = route();
      // A new page takes the focus to its content (a screen reader reads
      // it from there); a tab of the same sandbox keeps it on the tab.
      const samePage = now.page === was.page && (now.page !== "sandbox" || (was.page === "sandbox" && now.id === was.id));
      was = now;
      setWhere(now);
      if (!samePage) document.getElementById("main")?.focus({ preventScroll: true });
    };
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  useEffect(() => {
    setAdmin(false);
    if (key) isAdmin(key).then(setAdmin);
  }, [key]);
  if (!key) {
    return (
      <SignIn
        onKey={(k) => {
          saveKey(k);
          setKey(k);
        }}
      />
    );
  }
  const signOut = () => {
    saveKey(null);
    setKey(null);
  };
  const current = where.page === "sandbox" ? "list" : where.page;
  return (
    <div class="shell">
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to the content
      </a>
      <header class="top">
        <a class="brand" href="#/">
          corral
        </a>
        <nav aria-label="main">
          <a href="#/" aria-current={current === "list" ? "page" : undefined}>
            Sandboxes
          </a>
          {sections
            .filter((s) => s !== "admin" || admin)
            .map((s) => (
              <a key={s} href={"#/" + s} aria-current={current === s ? "page" : undefined}>
                {names[s]}
              </a>
            ))}
        </nav>
        <button class="quiet" type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {where.page === "sandbox" && <SandboxPage apiKey={key} id={where.id} tab={where.tab} />}
        {where.page === "list" && <SandboxList apiKey={key} />}
        {where.page === "snapshots" && <Snapshots apiKey={key} />}
        {where.page === "volumes" && <Volumes apiKey={key} />}
        {where.page === "templates" && <Templates apiKey={key} />}
        {where.page === "webhooks" && <Webhooks apiKey={key} />}
        {where.page === "quota" && <Quota apiKey={key} />}
        {where.page === "admin" && (admin ? <Admin apiKey={key} /> : <p class="empty">This key is not an admin's.</p>)}
      </main>
    </div>
  );
}

render(<App />, document.getElementById("app")!);
