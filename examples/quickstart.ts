// The quickstart topology (`pnpm start`): events come in over HTTP, go through two transforms,
// are appended to a file (acknowledged: the HTTP response waits for the fsync) and printed on the
// console (not acknowledged: printing never holds up a response). Each request's batch status is
// printed as it resolves.
//
//   pnpm start                    run until Ctrl-C (a second Ctrl-C stops at once)
//   pnpm start --smoke            send one request to itself, print its status, exit (0 when 200)
//
// Environment: ACKLINE_QUICKSTART_ADDRESS (default 127.0.0.1:8686), ACKLINE_QUICKSTART_DATA_DIR
// (default <tmp>/ackline-quickstart), ACKLINE_QUICKSTART_EXIT_AFTER_MS (stop after that long).
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { console as consoleSink, file } from '@ackline/sinks'
import { httpServer } from '@ackline/sources'
import { TopologyBuilder } from '@ackline/topology'
import { filter, remap } from '@ackline/transforms'

const smoke = process.argv.includes('--smoke')
const address = process.env.ACKLINE_QUICKSTART_ADDRESS ?? '127.0.0.1:8686'
const exitAfterMs = Number(process.env.ACKLINE_QUICKSTART_EXIT_AFTER_MS ?? 0)
// A smoke run writes to a fresh directory of its own and removes it, so it leaves nothing behind.
const dataDir = smoke
  ? mkdtempSync(join(tmpdir(), 'ackline-quickstart-smoke-'))
  : (process.env.ACKLINE_QUICKSTART_DATA_DIR ?? join(tmpdir(), 'ackline-quickstart'))
mkdirSync(dataDir, { recursive: true })
const path = join(dataDir, 'events.ndjson')

const source = httpServer({ address })
const topology = new TopologyBuilder({ acknowledgements: true })
  .source('http', source)
  // An event without a message is refused: its request gets 400 instead of a silent success.
  .transform(
    'require_message',
    ['http'],
    filter((e) => typeof e.get('message') === 'string', { dropStatus: 'rejected' }),
  )
  .transform(
    'enrich',
    ['require_message'],
    remap((e) => {
      e.set('received_at', new Date(e.metadata.ingestTimestamp).toISOString())
    }),
  )
  .sink('archive', ['enrich'], file({ path }))
  .sink('print', ['enrich'], consoleSink(), { acknowledgements: false })
  .build()

topology.lifecycle.subscribe((fact) => {
  if (fact.type === 'batch_resolved') {
    process.stderr.write(
      `ack: batch ${fact.batchId} from '${fact.source}' ${fact.status} in ${fact.latencyMs} ms\n`,
    )
  } else if (fact.type === 'component_error') {
    process.stderr.write(`error: ${fact.message}\n`)
  }
})

await topology.start()
const bound = await source.listening().catch(async (error: unknown) => {
  process.stderr.write(`${String(error)}\n(set ACKLINE_QUICKSTART_ADDRESS to another host:port)\n`)
  await topology.stop({ drainTimeoutMs: 0 })
  process.exit(1)
})
const url = `http://${bound.host.includes(':') ? `[${bound.host}]` : bound.host}:${bound.port}/`

if (smoke) {
  const { status, body } = await post(url, '{"message":"hello from the smoke test"}\n')
  process.stdout.write(`smoke: POST ${url} answered ${status} ${body}`)
  await topology.stop({ drainTimeoutMs: 5000 })
  rmSync(dataDir, { recursive: true, force: true })
  process.exit(status === 200 ? 0 : 1)
}

process.stderr.write(`ackline quickstart: listening on ${url}
  events are appended to ${path} (the response waits for the fsync) and printed below.

  Send events, and watch the status code:
    curl -i -H 'content-type: application/json' -d '[{"message":"hello"},{"message":"world"}]' ${url}   # 200
    printf '{"message":"one"}\\n{"message":"two"}\\n' | curl -i -H 'content-type: application/x-ndjson' --data-binary @- ${url}   # 200
    curl -i -d '[{"no_message":true}]' ${url}   # 400: the filter rejects events without a message
    curl -i -d '[{"message":' ${url}            # 400: malformed JSON, nothing enters the pipeline

  Ctrl-C stops (draining in-flight events for up to 5 s); a second Ctrl-C stops at once.
`)

const stop = (): void => {
  process.stderr.write('stopping…\n')
  void topology.stop({ drainTimeoutMs: 5000 })
}
process.on('SIGINT', stop)
process.on('SIGTERM', stop)
if (exitAfterMs > 0) setTimeout(stop, exitAfterMs).unref()
await topology.done
process.exit(0)

/** One POST, on a connection of its own. */
function post(target: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, agent: false },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          text += chunk
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}
