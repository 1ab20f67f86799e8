// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// A scenario of the OpenSandbox JavaScript SDK's volumes and snapshots,
// as its users write them: a host volume read-write and read-only, a named
// volume, then a snapshot restored into a new sandbox. It prints one JSON
// line of findings and exits non-zero on the first failed expectation.
import { readFileSync, writeFileSync } from "node:fs";
import { ConnectionConfig, Sandbox, SandboxManager } from "@alibaba-group/opensandbox";

const config = new ConnectionConfig({
  domain: process.env.CORRAL_DOMAIN,
  apiKey: process.env.CORRAL_API_KEY,
  protocol: "http",
  requestTimeoutSeconds: 60,
});
const hostDir = process.env.CORRAL_HOST_DIR;

function expect(cond, what) {
  if (!cond) {
    throw new Error("expectation failed: " + what);
  }
}

const findings = {};
writeFileSync(hostDir + "/from-host.txt", "written on the host");
const sandbox = await Sandbox.create({
  connectionConfig: config,
  image: process.env.CORRAL_IMAGE,
  timeoutSeconds: 600,
  volumes: [
    { name: "work", host: { path: hostDir }, mountPath: "/mnt/work" },
    { name: "ref", host: { path: hostDir }, mountPath: "/mnt/ref", readOnly: true },
    { name: "cache", pvc: { claimName: "js-cache" }, mountPath: "/cache" },
  ],
});
findings.id = sandbox.id;

const read = await sandbox.commands.run("cat /mnt/work/from-host.txt");
findings.fromHost = read.logs.stdout.map((m) => m.text).join("");
expect(findings.fromHost === "written on the host", "host file " + JSON.stringify(findings.fromHost));

await sandbox.files.writeFiles([{ path: "/mnt/work/from-sandbox.txt", data: "written in the sandbox", mode: 644 }]);
findings.onHost = readFileSync(hostDir + "/from-sandbox.txt", "utf8");
expect(findings.onHost === "written in the sandbox", "the host sees " + JSON.stringify(findings.onHost));

const ro = await sandbox.commands.run("echo no > /mnt/ref/x");
findings.readOnlyRefused = !!ro.error;
expect(ro.error, "a write to the read-only volume failed");

await sandbox.commands.run("echo cached > /cache/c; echo kept > /root/state.txt");

const manager = SandboxManager.create({ connectionConfig: config });
let snap = await manager.createSnapshot(sandbox.id, { name: "js" });
for (let i = 0; i < 600 && snap.status.state === "Creating"; i++) {
  await new Promise((r) => setTimeout(r, 100));
  snap = await manager.getSnapshot(snap.id);
}
findings.snapshotState = snap.status.state;
expect(snap.status.state === "Ready", "snapshot " + JSON.stringify(snap.status));
const listed = await manager.listSnapshots({ sandboxId: sandbox.id });
expect(listed.items.some((s) => s.id === snap.id), "snapshot listed");

const restored = await Sandbox.create({ connectionConfig: config, snapshotId: snap.id, timeoutSeconds: 600 });
const state = await restored.commands.run("cat /root/state.txt");
findings.restored = state.logs.stdout.map((m) => m.text).join("");
expect(findings.restored === "kept", "restored file " + JSON.stringify(findings.restored));

const again = await Sandbox.create({
  connectionConfig: config,
  image: process.env.CORRAL_IMAGE,
  timeoutSeconds: 600,
  volumes: [{ name: "cache", pvc: { claimName: "js-cache", createIfNotExists: false }, mountPath: "/c" }],
});
const cached = await again.commands.run("cat /c/c");
findings.sharedNamed = cached.logs.stdout.map((m) => m.text).join("");
expect(findings.sharedNamed === "cached", "named volume " + JSON.stringify(findings.sharedNamed));

let refused = null;
try {
  await Sandbox.create({
    connectionConfig: config,
    image: process.env.CORRAL_IMAGE,
    volumes: [{ name: "x", host: { path: "/etc" }, mountPath: "/mnt/x" }],
  });
} catch (e) {
  refused = e.error?.code ?? String(e);
}
findings.outsideRefused = refused;
expect(refused === "VOLUME::HOST_PATH_NOT_ALLOWED", "a host path outside the allowed prefixes: " + refused);

for (const s of [sandbox, restored, again]) {
  await s.kill();
  await s.close();
}
await manager.deleteSnapshot(snap.id);
await manager.close();
console.log(JSON.stringify(findings));
