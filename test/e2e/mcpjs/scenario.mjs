// Drives `corral mcp` over stdio with the MCP TypeScript SDK's own client
// and prints what it found as one JSON line. Set CORRAL_BIN, CORRAL_SERVER,
// CORRAL_API_KEY and CORRAL_POLICY.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const env = process.env;
const transport = new StdioClientTransport({
  command: env.CORRAL_BIN,
  args: ["mcp", "--server", env.CORRAL_SERVER, "--api-key", env.CORRAL_API_KEY, "--policy", env.CORRAL_POLICY],
  stderr: "inherit",
});
const client = new Client({ name: "corral-e2e-js", version: "1.0.0" });
await client.connect(transport);

const findings = {};
const { tools } = await client.listTools();
findings.tools = tools.length;
findings.withOutputSchema = tools.filter((t) => t.outputSchema && t.outputSchema.type === "object").length;

const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args });
  return { isError: !!res.isError, out: res.structuredContent, content: res.content };
};

const created = await call("sandbox_create", {});
if (created.isError) throw new Error("sandbox_create: " + JSON.stringify(created.out));
findings.state = created.out.state;
const run = await call("command_run", { command: "echo from-js; exit 7" });
findings.stdout = run.out.stdout.text;
findings.exitCode = run.out.exit_code;
await call("file_write", { path: "js.txt", content: "written by js" });
findings.read = (await call("file_read", { path: "js.txt" })).out.content;
const outside = await call("file_read", { path: "/etc/passwd" });
findings.outsideClass = outside.out.error.class;
// A schema error: the SDK's client may throw on it or return it as a tool error.
try {
  const bad = await client.callTool({ name: "command_run", arguments: { command: 5 } });
  findings.badArgs = bad.isError ? "tool-error" : "accepted";
} catch (e) {
  findings.badArgs = "protocol-error";
}
const kill = await call("sandbox_kill", {});
findings.killed = kill.out.killed;
await client.close();
console.log(JSON.stringify(findings));
