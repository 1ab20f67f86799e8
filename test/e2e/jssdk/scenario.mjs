// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// A scenario written against the OpenSandbox JavaScript SDK as its users
// write it. The Go test runs it against corral: it prints one JSON line of
// findings and exits non-zero on the first failed expectation.
import { ConnectionConfig, Sandbox, SandboxManager } from "@alibaba-group/opensandbox";

const config = new ConnectionConfig({
  domain: process.env.CORRAL_DOMAIN,
  apiKey: process.env.CORRAL_API_KEY,
  protocol: "http",
  requestTimeoutSeconds: 60,
});

function expect(cond, what) {
  if (!cond) {
    throw new Error("expectation failed: " + what);
  }
}

const findings = {};
const sandbox = await Sandbox.create({
  connectionConfig: config,
  image: process.env.CORRAL_IMAGE,
  timeoutSeconds: 600,
  resource: { cpu: "1", memory: "512Mi" },
  env: { GREETING: "hello from js" },
});
findings.id = sandbox.id;

const info = await sandbox.getInfo();
expect(info.status.state === "Running", "state Running, got " + info.status.state);

const hello = await sandbox.commands.run("echo $GREETING; echo to-stderr >&2");
findings.stdout = hello.logs.stdout.map((m) => m.text);
findings.stderr = hello.logs.stderr.map((m) => m.text);
expect(findings.stdout[0] === "hello from js", "stdout " + JSON.stringify(findings.stdout));
expect(findings.stderr[0] === "to-stderr", "stderr " + JSON.stringify(findings.stderr));

const failing = await sandbox.commands.run("exit 3");
findings.exitError = failing.error ? { name: failing.error.name, value: failing.error.value } : null;
expect(failing.error && failing.error.value === "3", "exit code 3 in error.value, got " + JSON.stringify(findings.exitError));

await sandbox.files.writeFiles([{ path: "/tmp/js/hello.txt", data: "written by js", mode: 644 }]);
const content = await sandbox.files.readFile("/tmp/js/hello.txt");
findings.file = content;
expect(content === "written by js", "file content " + JSON.stringify(content));

const manager = SandboxManager.create({ connectionConfig: config });
const list = await manager.listSandboxInfos({ states: ["Running"] });
expect(list.items.some((s) => s.id === sandbox.id), "listed");

await sandbox.kill();
let gone = false;
try {
  await sandbox.getInfo();
} catch (e) {
  gone = true;
  findings.afterKill = e.error?.code ?? String(e);
}
expect(gone, "getInfo after kill fails");
await sandbox.close();
console.log(JSON.stringify(findings));
