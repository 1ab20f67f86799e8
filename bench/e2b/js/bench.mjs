// Times create → first command with E2B's SDK, unchanged, against
// corral's E2B API (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY): N rounds
// of Sandbox.create, commands.run('true'), kill. Prints the durations in
// milliseconds as JSON.
import { Sandbox } from 'e2b'

const opts = { apiUrl: process.env.E2B_API_URL, sandboxUrl: process.env.E2B_SANDBOX_URL, apiKey: process.env.E2B_API_KEY }
const n = Number(process.env.N || 20)
const out = []
for (let i = 0; i < n + 2; i++) {
  const t0 = performance.now()
  const sbx = await Sandbox.create(process.env.E2B_TEMPLATE || 'base', { ...opts, timeoutMs: 120_000 })
  const r = await sbx.commands.run('true')
  const ms = performance.now() - t0
  if (r.exitCode !== 0) throw new Error('true failed')
  await sbx.kill()
  if (i >= 2) out.push(ms) // the first two warm the SDK and the server
}
console.log(JSON.stringify(out))
