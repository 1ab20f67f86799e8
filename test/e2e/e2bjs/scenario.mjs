// Runs E2B's SDKs, unchanged, against corral: E2B_API_URL and
// E2B_SANDBOX_URL point at corral's --e2b-listen, E2B_API_KEY is a corral
// key. MODE=full runs everything, MODE=basic create, commands and files
// (the docker tier). The last line printed is the findings, as JSON.
import { Sandbox, CommandExitError, AuthenticationError, NotFoundError } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import { randomBytes } from 'node:crypto'

const opts = { apiUrl: process.env.E2B_API_URL, sandboxUrl: process.env.E2B_SANDBOX_URL, apiKey: process.env.E2B_API_KEY, requestTimeoutMs: 120_000 }
const template = process.env.E2B_TEMPLATE || 'base'
const full = (process.env.MODE || 'full') === 'full'
const findings = {}
const check = (cond, what, got) => {
  if (!cond) throw new Error(`${what}: got ${JSON.stringify(got)}`)
}
// step names the part running now on stderr, so a failure says where.
const step = (name) => console.error(`step: ${name} (${new Date().toISOString()})`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
async function until(what, fn, ms = 20_000) {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

const sbx = await Sandbox.create(template, { ...opts, metadata: { suite: 'e2b', 'team.name': 'a-1_b.c' }, envs: { GREETING: 'hello' }, timeoutMs: 300_000 })
check(/^[a-z0-9]+$/.test(sbx.sandboxId), 'sandbox id form', sbx.sandboxId)
try {
  step('info')
  // info
  const info = await sbx.getInfo()
  check(info.state === 'running' && info.metadata['team.name'] === 'a-1_b.c' && info.templateId === template, 'info', info)
  findings.info = info.state

  step('list')
  // list by metadata (the filter is encoded three times on the wire)
  const found = await Sandbox.list({ ...opts, query: { metadata: { 'team.name': 'a-1_b.c' } } }).nextItems()
  check(found.some((s) => s.sandboxId === sbx.sandboxId), 'list by metadata', found)
  const none = await Sandbox.list({ ...opts, query: { metadata: { 'team.name': 'other' } } }).nextItems()
  check(!none.some((s) => s.sandboxId === sbx.sandboxId), 'list by other metadata', none)
  findings.list = found.length

  step('commands')
  // a command, streamed, and one that fails
  const out = []
  const err = []
  const r = await sbx.commands.run('echo $GREETING; echo oops >&2', { onStdout: (d) => out.push(d), onStderr: (d) => err.push(d) })
  check(r.exitCode === 0 && r.stdout === 'hello\n' && r.stderr === 'oops\n' && out.join('') === 'hello\n' && err.join('') === 'oops\n', 'command', { r, out, err })
  try {
    await sbx.commands.run('echo partial; exit 3')
    throw new Error('exit 3 did not throw')
  } catch (e) {
    check(e instanceof CommandExitError && e.exitCode === 3 && e.stdout === 'partial\n', 'CommandExitError', { name: e.name, message: e.message, exitCode: e.exitCode })
  }
  findings.command = 'ok'

  step('files')
  // files: text, 1 MiB of binary, list, stat, make, rename, remove
  await sbx.files.write('/tmp/e2b/hello.txt', 'hello, files\n')
  check((await sbx.files.read('/tmp/e2b/hello.txt')) === 'hello, files\n', 'text read back', null)
  const blob = randomBytes(1 << 20)
  await sbx.files.write('/tmp/e2b/blob.bin', blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength))
  const back = Buffer.from(await sbx.files.read('/tmp/e2b/blob.bin', { format: 'bytes' }))
  check(back.equals(blob), 'binary read back', back.length)
  const listed = await sbx.files.list('/tmp/e2b')
  check(listed.map((e) => e.name).sort().join(',') === 'blob.bin,hello.txt', 'list', listed)
  const st = await sbx.files.getInfo('/tmp/e2b/blob.bin')
  check(st.size === 1 << 20 && st.type === 'file', 'stat', st)
  check((await sbx.files.makeDir('/tmp/e2b/sub')) === true && (await sbx.files.makeDir('/tmp/e2b/sub')) === false, 'makeDir', null)
  const moved = await sbx.files.rename('/tmp/e2b/hello.txt', '/tmp/e2b/sub/moved.txt')
  check(moved.path === '/tmp/e2b/sub/moved.txt', 'rename', moved)
  await sbx.files.remove('/tmp/e2b/sub')
  check((await sbx.files.exists('/tmp/e2b/sub/moved.txt')) === false, 'remove', null)
  findings.files = 'ok'

  if (full) {
    step('background')
    // a background process: output, list, kill
    const h = await sbx.commands.run('for i in 1 2 3; do echo tick $i; sleep 0.1; done; sleep 600', { background: true })
    await until('background output', () => h.stdout.includes('tick 3'))
    const procs = await sbx.commands.list()
    check(procs.some((p) => p.pid === h.pid), 'process list', procs)
    check((await h.kill()) === true, 'kill', null)
    try {
      await h.wait()
      throw new Error('a killed process did not fail')
    } catch (e) {
      check(e instanceof CommandExitError, 'killed process', e.message)
    }
    check(!(await sbx.commands.list()).some((p) => p.pid === h.pid), 'process gone', null)
    findings.background = 'ok'

    step('watch')
    // a watched directory sees a file a command writes
    await sbx.files.makeDir('/tmp/watched')
    const events = []
    const w = await sbx.files.watchDir('/tmp/watched', (e) => events.push(e))
    await sbx.commands.run('echo x > /tmp/watched/new.txt')
    await until('a watch event', () => events.some((e) => e.name === 'new.txt'))
    await w.stop()
    findings.watch = events.map((e) => e.type).join(',')

    step('timeout')
    // set timeout moves endAt
    const before = (await sbx.getInfo()).endAt
    await sbx.setTimeout(900_000)
    const after = (await sbx.getInfo()).endAt
    check(after.getTime() > before.getTime(), 'setTimeout moves endAt', { before, after })
    findings.timeout = 'moved'

    step('pause and connect')
    // pause, then connect: the file is still there
    await sbx.files.write('/tmp/keep.txt', 'kept')
    check((await sbx.pause()) === true, 'pause', null)
    check((await sbx.getInfo()).state === 'paused', 'paused state', null)
    const again = await Sandbox.connect(sbx.sandboxId, opts)
    check((await again.files.read('/tmp/keep.txt')) === 'kept', 'file after resume', null)
    findings.resume = 'kept'
  }
} finally {
  await sbx.kill()
}
check((await Sandbox.kill(sbx.sandboxId, opts)) === false, 'a second kill', null)
try {
  await Sandbox.getInfo(sbx.sandboxId, opts)
  throw new Error('info of a killed sandbox')
} catch (e) {
  check(e.name === 'SandboxNotFoundError' || e instanceof NotFoundError, 'info after kill', e.name)
}
findings.kill = 'ok'

try {
  await Sandbox.create(template, { ...opts, apiKey: 'e2b_0000000000000000000000000000000000000000' })
  throw new Error('a bad key was accepted')
} catch (e) {
  check(e instanceof AuthenticationError, 'bad key', e.name)
}
findings.badKey = 'AuthenticationError'

if (full) {
  const ci = await CodeSandbox.create(process.env.E2B_CODE_TEMPLATE || 'code-interpreter-v1', { ...opts, timeoutMs: 300_000 })
  try {
    step('code: state')
    await ci.runCode('x = 41')
    const e1 = await ci.runCode('x + 1')
    check(e1.text === '42' && e1.error === undefined, 'state kept between calls', e1)
    step('code: stdout')
    const e2 = await ci.runCode('print("hi")')
    check(e2.logs.stdout.join('') === 'hi\n', 'stdout', e2.logs)
    step('code: error')
    const e3 = await ci.runCode('1/0')
    check(e3.error && e3.error.name === 'ZeroDivisionError', 'error', e3.error)
    step('code: png')
    const e4 = await ci.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()')
    const png = e4.results.find((r) => r.png)
    check(png && Buffer.from(png.png, 'base64').subarray(0, 4).toString('latin1') === '\x89PNG', 'a PNG result', e4)
    step('code: context')
    const ctx = await ci.createCodeContext()
    await ci.runCode('y = 5', { context: ctx })
    const e5 = await ci.runCode('y', { context: ctx })
    check(e5.text === '5', 'a context of its own', e5)
    const e6 = await ci.runCode('y')
    check(e6.error && e6.error.name === 'NameError', 'the default context does not see it', e6.error)
    findings.code = 'ok'
  } finally {
    await ci.kill()
  }
}
console.log(JSON.stringify(findings))
