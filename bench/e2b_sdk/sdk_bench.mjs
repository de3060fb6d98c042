// One round = create a sandbox, run `true` in it, kill it; timed through the
// official e2b SDK and through airlock's own /v1 API (fetch, the same bash
// command line the SDK sends), interleaved so both see the same host. Run by
// bench/e2b_sdk_bench.py, which starts the daemon and installs the SDK.
//   E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, AIRLOCK_URL, ROUNDS, TEMPLATE

import { Sandbox } from 'e2b'

const api = process.env.AIRLOCK_URL
const key = process.env.E2B_API_KEY
const rounds = Number(process.env.ROUNDS ?? 20)
const template = process.env.TEMPLATE ?? 'base'

async function v1(method, path, body) {
  const response = await fetch(api + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return text ? JSON.parse(text) : null
}

async function finished(operation) {
  for (let i = 0; i < 10; i++) {
    const op = await v1('GET', `/v1/operations/${operation}?wait=30`)
    if (op.state === 'succeeded') return op
    if (op.state === 'failed' || op.state === 'cancelled') throw new Error(JSON.stringify(op.error))
  }
  throw new Error(`operation ${operation} did not end`)
}

async function viaSdk() {
  const sandbox = await Sandbox.create(template)
  const result = await sandbox.commands.run('true')
  if (result.exitCode !== 0) throw new Error('true failed')
  await sandbox.kill()
}

async function viaV1() {
  const created = await v1('POST', '/v1/sandboxes', { template })
  await finished(created.operation_id)
  const id = created.sandbox_id
  const started = await v1('POST', `/v1/sandboxes/${id}/processes`, {
    argv: ['/bin/bash', '-l', '-c', 'true'],
  })
  const ended = await v1('GET', `/v1/sandboxes/${id}/processes/${started.process_id}?wait=30`)
  if (ended.exit_code !== 0) throw new Error('true failed: ' + JSON.stringify(ended))
  const deleted = await v1('DELETE', `/v1/sandboxes/${id}`)
  await finished(deleted.operation_id)
}

const timings = { sdk: [], v1: [] }
async function timed(name, round) {
  const started = performance.now()
  await round()
  timings[name].push(performance.now() - started)
}

await timed('sdk', viaSdk) // warm-up: the SDK's first call loads its modules
await timed('v1', viaV1)
timings.sdk = []
timings.v1 = []
for (let i = 0; i < rounds; i++) {
  // Alternate which goes first, so neither always follows the other's cleanup.
  if (i % 2 === 0) {
    await timed('sdk', viaSdk)
    await timed('v1', viaV1)
  } else {
    await timed('v1', viaV1)
    await timed('sdk', viaSdk)
  }
}

const at = (samples, q) => {
  const ordered = [...samples].sort((a, b) => a - b)
  return ordered[Math.min(ordered.length - 1, Math.floor(q * ordered.length))]
}
console.log(`create + run('true') + kill, template ${template}, ${rounds} rounds each (ms)`)
console.log('path            p50      p90      min')
for (const name of ['v1', 'sdk']) {
  const s = timings[name]
  const label = name === 'v1' ? 'airlock /v1' : 'e2b SDK'
  console.log(`${label.padEnd(12)} ${at(s, 0.5).toFixed(1).padStart(7)}  ${at(s, 0.9).toFixed(1).padStart(7)}  ${Math.min(...s).toFixed(1).padStart(7)}`)
}
console.log(`SDK minus /v1 at p50: ${(at(timings.sdk, 0.5) - at(timings.v1, 0.5)).toFixed(1)} ms`)
