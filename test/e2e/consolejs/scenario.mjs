// The console in a real browser: Debian's chromium driven by
// playwright-core against the corral server at CORRAL_URL (key
// CORRAL_KEY). Screenshots go to SHOTS. Prints one JSON line of what it
// saw; any failed expectation throws (exit 1) naming its step.
import { chromium } from "playwright-core";
import { mkdirSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";

const base = process.env.CORRAL_URL;
const key = process.env.CORRAL_KEY;
const shots = process.env.SHOTS;
mkdirSync(shots, { recursive: true });
const seen = { steps: [] };
let step = "launch";
const timeout = 20_000;

async function api(method, path, body) {
  const res = await fetch(base + "/v1" + path, {
    method,
    headers: { "OPEN-SANDBOX-API-KEY": key, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.status === 204 ? null : res.json();
}

// run runs a command in a sandbox through the proxy (execd) and answers its stdout.
async function run(id, command) {
  const res = await fetch(`${base}/v1/sandboxes/${id}/proxy/44772/command`, {
    method: "POST",
    headers: { "OPEN-SANDBOX-API-KEY": key, "Content-Type": "application/json" },
    body: JSON.stringify({ command }),
  });
  if (!res.ok) throw new Error(`run ${command}: ${res.status} ${await res.text()}`);
  let out = "";
  for (const line of (await res.text()).split("\n")) {
    if (!line.startsWith("data:")) continue;
    const ev = JSON.parse(line.slice(5));
    if (ev.type === "stdout") out += ev.text + "\n";
  }
  return out;
}

// waitText waits until the element's text matches re.
async function waitText(page, selector, re) {
  await page.waitForFunction(
    ([sel, src]) => [...document.querySelectorAll(sel)].some((e) => new RegExp(src).test(e.textContent ?? "")),
    [selector, re.source],
    { timeout },
  );
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox"],
});
const made = []; // sandboxes to delete at the end, whatever happened
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  // Anything a page's CSP refuses, layout shifts, and the flag hostile content would set.
  await context.addInitScript(() => {
    window.__csp = [];
    document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));
    window.__cls = 0;
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) if (!e.hadRecentInput) window.__cls += e.value;
    }).observe({ type: "layout-shift", buffered: true });
  });
  const page = await context.newPage();
  const consoleErrors = [];
  // The browser logs each refused request ("Failed to load resource"):
  // those are the API's answers the page shows (a bad key, a sandbox that
  // is gone), not faults of the page.
  page.on("console", (m) => m.type() === "error" && !m.text().startsWith("Failed to load resource") && consoleErrors.push(m.text()));
  page.on("pageerror", (e) => consoleErrors.push("pageerror: " + e.message));
  const tab = (name) => page.getByRole("tab", { name, exact: true }).click();
  const confirmWith = (name) => page.getByRole("dialog").getByRole("button", { name, exact: true }).click();
  const pwned = () => page.evaluate(() => window.__pwned ?? null);

  step = "a bad key shows the API's error";
  await page.goto(base + "/ui/");
  await page.getByLabel("API key").fill("ck_not-a-real-key-0000000000");
  await page.getByRole("button", { name: "Sign in" }).click();
  const alert = page.getByRole("alert");
  await alert.waitFor({ timeout });
  seen.badKey = (await alert.innerText()).replace(/\s+/g, " ");
  if (!/401/.test(seen.badKey)) throw new Error("the error shown: " + seen.badKey);
  await page.screenshot({ path: `${shots}/signin-error.png` });
  seen.steps.push(step);

  step = "sign in";
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Sandboxes" }).waitFor({ timeout });
  await page.locator(".live.on").waitFor({ timeout });
  seen.keyInStorage = await page.evaluate(() => sessionStorage.getItem("corral.apiKey") !== null && document.cookie === "");
  seen.steps.push(step);

  step = "hostile metadata is refused by the API";
  seen.metadataRefused = [];
  for (const md of [{ note: "<img src=x onerror=window.__pwned=1>" }, { "</script>": "x" }]) {
    const res = await fetch(base + "/v1/sandboxes", {
      method: "POST",
      headers: { "OPEN-SANDBOX-API-KEY": key, "Content-Type": "application/json" },
      body: JSON.stringify({ image: { uri: "host" }, entrypoint: ["sleep", "60"], resourceLimits: { cpu: "1", memory: "256Mi" }, metadata: md }),
    });
    seen.metadataRefused.push(res.status);
    if (res.status !== 400) throw new Error(`metadata ${JSON.stringify(md)}: ${res.status}`);
  }
  seen.steps.push(step);

  step = "a sandbox created through the API appears without a reload";
  const created = await api("POST", "/sandboxes", {
    image: { uri: "host" }, entrypoint: ["sleep", "3600"], timeout: 600,
    resourceLimits: { cpu: "1", memory: "512Mi" }, metadata: { console: "test" },
    networkPolicy: { defaultAction: "deny", egress: [{ action: "allow", target: "allowed.test" }] },
    extensions: { "corral.dev/events": "true" },
  });
  made.push(created.id);
  const id = created.id;
  const row = page.locator(`tr[data-id="${id}"]`);
  await row.waitFor({ timeout });
  await row.locator(".state.running").waitFor({ timeout });
  await page.screenshot({ path: `${shots}/sandboxes.png` });
  seen.steps.push(step);

  step = "open it: its CPU and memory are charted";
  await row.getByRole("link").click();
  await page.getByRole("heading", { name: /Sandbox/ }).waitFor({ timeout });
  const state = page.getByTestId("state");
  await page.waitForFunction(() => document.querySelector('[data-testid="state"]')?.textContent === "Running", null, { timeout });
  await page.waitForFunction(() => document.querySelectorAll("figure.chart path.line").length === 2, null, { timeout });
  seen.metrics = await page.locator("figure.chart figcaption").allInnerTexts();
  if (!/%/.test(seen.metrics[0]) || !/MiB/.test(seen.metrics[1])) throw new Error("the charts say " + JSON.stringify(seen.metrics));
  await page.screenshot({ path: `${shots}/sandbox.png` });
  seen.steps.push(step);

  step = "type echo in the terminal and see its output";
  await tab("Terminal");
  await page.getByRole("button", { name: "Open a terminal" }).click();
  await page.getByTestId("term-status").filter({ hasText: "connected" }).waitFor({ timeout });
  await page.getByTestId("terminal").click();
  await page.keyboard.type("echo console-$((6*7))");
  await page.keyboard.press("Enter");
  await waitText(page, ".xterm-rows", /console-42/);
  seen.terminal = (await page.locator(".xterm-rows").innerText()).split("\n").filter((l) => l.trim()).slice(-3);
  await page.screenshot({ path: `${shots}/terminal.png` });
  seen.steps.push(step);

  step = "a terminal taken over is taken back, with what it printed meanwhile";
  const session = await page.getByTestId("terminal").getAttribute("data-session");
  const ep = await api("GET", `/sandboxes/${id}/endpoints/44772?use_server_proxy=true`);
  const token = Object.values(ep.headers ?? {})[0];
  const other = await context.newPage();
  await other.goto(base + "/ui/");
  await other.evaluate(
    async ([id, session, token]) => {
      const ws = new WebSocket(`ws://${location.host}/v1/sandboxes/${id}/proxy/44772/pty/${session}/ws?takeover=1`, ["corral", "corral.token." + token]);
      ws.binaryType = "arraybuffer";
      await new Promise((ok, fail) => ((ws.onopen = ok), (ws.onerror = () => fail(new Error("the other client could not attach")))));
      const text = new TextEncoder().encode("echo away-$((2*21))\r");
      const frame = new Uint8Array(text.length + 1);
      frame.set(text, 1);
      ws.send(frame);
      await new Promise((r) => setTimeout(r, 1000));
      ws.close(1000);
    },
    [id, session, token],
  );
  await other.close();
  await page.getByTestId("term-status").filter({ hasText: "took this terminal over" }).waitFor({ timeout });
  await page.getByRole("button", { name: "Take it back" }).click();
  await waitText(page, ".xterm-rows", /away-42/);
  await page.getByRole("button", { name: "Close the terminal" }).click();
  seen.steps.push(step);

  step = "upload a file with the page, download it, bytes equal";
  await tab("Files");
  const bytes = randomBytes(3 << 20);
  await page.locator('input[type="file"]').setInputFiles({ name: "data.bin", mimeType: "application/octet-stream", buffer: bytes });
  const fileRow = page.locator('tr[data-path="/tmp/data.bin"]');
  await fileRow.waitFor({ timeout });
  const [dl] = await Promise.all([page.waitForEvent("download", { timeout }), page.getByRole("button", { name: "Download data.bin" }).click()]);
  const got = readFileSync(await dl.path());
  seen.download = { name: dl.suggestedFilename(), bytes: got.length, equal: Buffer.compare(got, bytes) === 0 };
  if (!seen.download.equal || seen.download.name !== "data.bin") throw new Error("the download: " + JSON.stringify(seen.download));
  await page.getByRole("button", { name: "Delete data.bin" }).click();
  await confirmWith("Delete");
  await fileRow.waitFor({ state: "detached", timeout });
  seen.steps.push(step);

  step = "hostile file names are text";
  for (const name of ["<img src=x onerror=window.__pwned=1>", "<svg onload=window.__pwned=2>", '"><script>window.__pwned=3<\u002fscript>']) {
    const form = new FormData();
    form.append("metadata", new Blob([JSON.stringify({ path: "/tmp/" + name, mode: 0o644 })]), "metadata");
    form.append("file", new Blob(["x"]), "file");
    const res = await fetch(`${base}/v1/sandboxes/${id}/proxy/44772/files/upload`, { method: "POST", headers: { "OPEN-SANDBOX-API-KEY": key }, body: form });
    if (!res.ok) throw new Error(`upload ${name}: ${res.status} ${await res.text()}`);
  }
  await page.getByRole("button", { name: "Open", exact: true }).click();
  await page.locator('tr[data-path="/tmp/<svg onload=window.__pwned=2>"]').waitFor({ timeout });
  seen.hostileText = await page.locator('tr[data-path="/tmp/<img src=x onerror=window.__pwned=1>"] td').first().innerText();
  if ((await pwned()) !== null || seen.hostileText !== "<img src=x onerror=window.__pwned=1>") throw new Error("hostile names: " + JSON.stringify(seen));
  await page.screenshot({ path: `${shots}/files.png` });
  seen.steps.push(step);

  step = "commands: run one from the page, hostile output is text in colour, history is live";
  await tab("Commands");
  await page.locator("#run-cmd").fill(String.raw`printf '\033[31m<img src=x onerror=window.__pwned=4>\033[0m done </script><script>window.__pwned=5</script>\n'`);
  await page.getByRole("button", { name: "Run", exact: true }).click();
  await waitText(page, '[data-testid="command-output"]', /onerror=window.__pwned=4> done <\/script><script>/);
  seen.red = await page.locator('[data-testid="command-output"] .a-1').first().innerText();
  if (seen.red !== "<img src=x onerror=window.__pwned=4>") throw new Error("the red part: " + seen.red);
  await run(id, "echo from-the-api; exit 3").catch(() => {});
  await page.locator("tr[data-command]", { hasText: "from-the-api" }).filter({ hasText: "exit 3" }).waitFor({ timeout });
  if ((await pwned()) !== null) throw new Error("a script ran: " + (await pwned()));
  await page.screenshot({ path: `${shots}/commands.png` });
  seen.steps.push(step);

  step = "hostile event details are text";
  const posted = await run(
    id,
    `curl -s -o /dev/null -w '%{http_code}' --unix-socket "$CORRAL_SECRETS_SOCKET" -H "Corral-Session-Key: $CORRAL_SESSION_KEY" ` +
      `-d '{"name":"build.done","data":{"html":"<img src=x onerror=window.__pwned=6>","end":"</script><script>window.__pwned=7</script>"}}' ` +
      `"http://corral/v1/sandboxes/$CORRAL_SANDBOX_ID/events"`,
  );
  if (!posted.startsWith("202")) throw new Error("the app event was answered " + posted);
  await tab("Overview");
  await waitText(page, ".events", /onerror=window.__pwned=6>/);
  if ((await pwned()) !== null) throw new Error("a script ran: " + (await pwned()));
  // Live data flows here (charts every 2 s): nothing on the page moves.
  await page.evaluate(() => (window.__cls = 0));
  await page.waitForTimeout(6500);
  seen.cls = await page.evaluate(() => window.__cls);
  seen.steps.push(step);

  step = "the egress audit shows allowed and denied names and connections";
  seen.egressRun = await run(id, "curl -s -m 5 http://allowed.test/; curl -s -m 3 http://denied.test/; true");
  if (!/hello from web/.test(seen.egressRun)) throw new Error("allowed.test from inside: " + seen.egressRun);
  await tab("Egress");
  await page.locator('tr[data-decision="deny"]', { hasText: "denied.test" }).first().waitFor({ timeout });
  await page.locator('tr[data-decision="allow"]', { hasText: "allowed.test" }).first().waitFor({ timeout });
  await page.screenshot({ path: `${shots}/egress.png` });
  seen.steps.push(step);

  step = "tabs move with the arrow keys";
  await page.getByRole("tab", { name: "Egress" }).focus();
  await page.keyboard.press("ArrowRight");
  await page.waitForFunction(() => document.activeElement?.id === "tab-overview" && document.activeElement.getAttribute("aria-selected") === "true", null, { timeout });
  await page.keyboard.press("ArrowLeft");
  await page.waitForFunction(() => document.activeElement?.id === "tab-network" && location.hash.endsWith("/network"), null, { timeout });
  seen.steps.push(step);

  step = "snapshot and fork from the page";
  await page.getByRole("button", { name: "Snapshot", exact: true }).click();
  await page.locator(".notice", { hasText: "being taken" }).waitFor({ timeout });
  await page.getByRole("navigation", { name: "main" }).getByRole("link", { name: "Snapshots" }).click();
  const snapRow = page.locator("tr[data-snapshot]", { hasText: id.slice(0, 8) });
  await snapRow.locator(".state.ready").waitFor({ timeout: 60_000 });
  await page.screenshot({ path: `${shots}/snapshots.png` });
  await snapRow.getByRole("button", { name: "Delete" }).click();
  await confirmWith("Delete");
  await snapRow.waitFor({ state: "detached", timeout });
  await page.goto(`${base}/ui/#/sandboxes/${id}`);
  await page.waitForFunction(() => document.querySelector('[data-testid="state"]')?.textContent === "Running", null, { timeout });
  await page.getByRole("button", { name: "Fork", exact: true }).click();
  const forkLink = page.locator(".notice", { hasText: "Forked into" }).getByRole("link");
  await forkLink.waitFor({ timeout: 60_000 });
  const forkId = (await forkLink.getAttribute("href")).split("/").pop();
  made.push(forkId);
  const fork = await api("GET", "/sandboxes/" + forkId);
  if (fork.status.state !== "Running") throw new Error("the fork is " + fork.status.state);
  seen.steps.push(step);

  step = "quota, webhooks and an admin's keys";
  const nav = page.getByRole("navigation", { name: "main" });
  await nav.getByRole("link", { name: "Quota" }).click();
  await page.locator("table.quota", { hasText: "Running sandboxes" }).waitFor({ timeout });
  await nav.getByRole("link", { name: "Webhooks" }).click();
  await page.getByText("No webhooks.").waitFor({ timeout });
  await page.getByLabel("URL").fill("http://127.0.0.1:9/hook");
  await page.getByRole("button", { name: "Subscribe" }).click();
  seen.webhookRefused = (await page.getByRole("alert").innerText()).replace(/\s+/g, " ");
  if (!/WEBHOOK::/.test(seen.webhookRefused)) throw new Error("the refused webhook shows " + seen.webhookRefused);
  await nav.getByRole("link", { name: "Admin" }).click();
  await page.getByLabel("Tenant").fill("console-other");
  await page.getByLabel("Name").fill("made in the console");
  await page.getByRole("button", { name: "Create a key" }).click();
  const newKey = await page.locator(".notice code.secret").innerText({ timeout });
  if ((await fetch(base + "/v1/sandboxes", { headers: { "OPEN-SANDBOX-API-KEY": newKey } })).status !== 200) throw new Error("the new key does not work");
  const keyRow = page.locator("tr", { hasText: "made in the console" });
  await keyRow.getByRole("button", { name: "Revoke" }).click();
  await confirmWith("Revoke");
  await keyRow.getByRole("button", { name: "Revoke" }).waitFor({ state: "detached", timeout });
  seen.revokedKey = (await fetch(base + "/v1/sandboxes", { headers: { "OPEN-SANDBOX-API-KEY": newKey } })).status;
  if (seen.revokedKey !== 401) throw new Error("the revoked key answers " + seen.revokedKey);
  await page.getByRole("heading", { name: "Tenants" }).waitFor({ timeout });
  await page.screenshot({ path: `${shots}/admin.png` });
  seen.steps.push(step);

  step = "a narrow window has no sideways scroll";
  await page.setViewportSize({ width: 420, height: 800 });
  await page.goto(`${base}/ui/#/`);
  await page.locator(`tr[data-id="${id}"]`).waitFor({ timeout });
  const wide = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  seen.narrowOverflow = [await wide()];
  await page.screenshot({ path: `${shots}/sandboxes-narrow.png`, fullPage: true });
  await page.goto(`${base}/ui/#/sandboxes/${id}`);
  await page.waitForFunction(() => document.querySelectorAll("figure.chart path.line").length === 2, null, { timeout });
  seen.narrowOverflow.push(await wide());
  await page.screenshot({ path: `${shots}/sandbox-narrow.png` });
  if (seen.narrowOverflow.some((n) => n > 1)) throw new Error("sideways overflow: " + seen.narrowOverflow);
  await page.setViewportSize({ width: 1280, height: 800 });
  seen.steps.push(step);

  step = "pause and resume from the page";
  await page.getByRole("button", { name: "Pause" }).click();
  await page.waitForFunction(() => document.querySelector('[data-testid="state"]')?.textContent === "Paused", null, { timeout });
  await page.getByRole("button", { name: "Resume" }).click();
  await page.waitForFunction(() => document.querySelector('[data-testid="state"]')?.textContent === "Running", null, { timeout });
  seen.stateAfterResume = await state.innerText();
  seen.steps.push(step);

  step = "kill from the page, confirmed in a dialog";
  await page.getByRole("button", { name: "Kill" }).click();
  await page.getByRole("dialog").waitFor({ timeout });
  seen.dialogFocus = await page.evaluate(() => document.activeElement?.textContent);
  await confirmWith("Kill");
  await page.getByText("no longer exists").waitFor({ timeout });
  const after = await fetch(base + "/v1/sandboxes/" + id, { headers: { "OPEN-SANDBOX-API-KEY": key } });
  seen.afterKill = after.status;
  if (after.status !== 404) throw new Error("the sandbox after Kill: " + after.status);
  seen.steps.push(step);

  step = "nothing refused by the CSP, no page errors, no script ran, no layout shift";
  seen.csp = await page.evaluate(() => window.__csp);
  seen.pwned = await pwned();
  seen.consoleErrors = consoleErrors;
  if (seen.csp.length || consoleErrors.length || seen.pwned !== null) throw new Error("CSP reports " + JSON.stringify(seen.csp) + ", errors " + JSON.stringify(consoleErrors));
  if (seen.cls >= 0.1) throw new Error("layout shift while data flowed: " + seen.cls);
  seen.steps.push(step);
  console.log(JSON.stringify(seen));
} catch (e) {
  console.log(JSON.stringify(seen));
  console.error(`step "${step}": ${e.stack || e}`);
  process.exitCode = 1;
} finally {
  for (const id of made) await fetch(`${base}/v1/sandboxes/${id}`, { method: "DELETE", headers: { "OPEN-SANDBOX-API-KEY": key } }).catch(() => {});
  await browser.close();
}
