// The HTTP load generator the benchmarks share: a child process, so its CPU is not charged to the
// server under test (on one event loop the client's own work would be measured as the server's).
// It posts over keep-alive connections, `concurrency` requests at a time, cycling through the
// bodies it was given, and reports how long the whole load took.
import { type ChildProcess, spawn } from 'node:child_process'

/** What one load measured. */
export interface LoadResult {
  /** Wall time from the first request sent to the last answer read, in ms (the child's clock). */
  readonly ms: number
  /** Requests answered with a status other than 200 (a benchmark must see 0). */
  readonly bad: number
  /** CPU time this process (the server's) spent while the load ran, in µs: user + system, all threads. */
  readonly cpuMicros: number
}

/** A running load generator. */
export interface LoadGenerator {
  /** Sends `requests` POSTs to `127.0.0.1:port` (request i carries body i modulo the bodies). */
  load(port: number, requests: number): Promise<LoadResult>
  /** Ends the child process. */
  close(): void
}

// The child: its first stdin line is the setup (concurrency, content type, bodies); each later
// line a load (port, requests), answered with one line of JSON on stdout.
const CHILD = `
const http = require('node:http')
let setup, agent, parts = []
process.stdin.setEncoding('utf8')
// The setup line is megabytes long: only each new chunk is searched for its end, and the line's
// parts are joined once (appending to one string and searching it all again was quadratic).
process.stdin.on('data', (chunk) => {
  let start = 0
  let newline
  while ((newline = chunk.indexOf('\\n', start)) >= 0) {
    parts.push(chunk.slice(start, newline))
    const line = JSON.parse(parts.join(''))
    parts = []
    start = newline + 1
    if (setup === undefined) {
      setup = line
      agent = new http.Agent({ keepAlive: true, maxSockets: setup.concurrency })
    } else run(line.port, line.requests)
  }
  if (start < chunk.length) parts.push(chunk.slice(start))
})
function post(port, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent,
      headers: { 'content-type': setup.contentType, 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
    })
    req.on('error', reject)
    req.end(body)
  })
}
async function run(port, requests) {
  let next = 0, bad = 0
  const start = performance.now()
  async function lane() {
    while (next < requests) {
      const body = setup.bodies[next++ % setup.bodies.length]
      if ((await post(port, body)) !== 200) bad++
    }
  }
  await Promise.all(Array.from({ length: setup.concurrency }, lane))
  process.stdout.write(JSON.stringify({ ms: performance.now() - start, bad }) + '\\n')
}
`

/**
 * Starts a load generator that keeps `concurrency` requests in flight, each with the
 * `contentType` header and one of `bodies`, in order.
 */
export function startLoadGenerator(options: {
  readonly concurrency: number
  readonly contentType: string
  readonly bodies: readonly string[]
}): LoadGenerator {
  const child: ChildProcess = spawn(process.execPath, ['-e', CHILD], { stdio: ['pipe', 'pipe', 'inherit'] })
  const stdin = child.stdin!
  stdin.write(`${JSON.stringify(options)}\n`)
  const answers: { resolve(line: string): void; reject(error: Error): void }[] = []
  child.on('exit', (code) => {
    for (const answer of answers.splice(0)) answer.reject(new Error(`the load generator exited (${code})`))
  })
  let pending = ''
  child.stdout!.setEncoding('utf8')
  child.stdout!.on('data', (chunk: string) => {
    pending += chunk
    for (let newline = pending.indexOf('\n'); newline >= 0; newline = pending.indexOf('\n')) {
      answers.shift()?.resolve(pending.slice(0, newline))
      pending = pending.slice(newline + 1)
    }
  })
  return {
    async load(port, requests) {
      const cpu = process.cpuUsage()
      const line = await new Promise<string>((resolve, reject) => {
        answers.push({ resolve, reject })
        stdin.write(`${JSON.stringify({ port, requests })}\n`)
      })
      const { user, system } = process.cpuUsage(cpu)
      const { ms, bad } = JSON.parse(line) as { ms: number; bad: number }
      return { ms, bad, cpuMicros: user + system }
    },
    close() {
      stdin.end()
    },
  }
}
