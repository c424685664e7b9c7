// Cost of decoding a request body safely, side by side in one process, per body layout:
//   safe:     decodeUtf8 (strict UTF-8 check, BOM skip) + parseRecords (JSON.parse + depth scan),
//             with as many events as its limit (maxEventsPerRequest): each event holds one more
//             object, so the JSON body has more braces than the limit and is walked once to count
//             its events before the parse (the walk also finds the depth, which is then not
//             walked again); NDJSON is parsed line by line up to the limit, with no walk first
//   baseline: Buffer#toString + JSON.parse, what decoding cost before the checks (for NDJSON
//             the same per line), with the same "array of objects" checks
// Bodies: 1,000 log-like events (~230 bytes each), as a JSON array and as NDJSON.
// Run: pnpm bench sources
import type { JsonObject } from '@ackline/core'
import { decodeUtf8 } from '../src/internal/decodeUtf8.js'
import { parseRecords } from '../src/internal/parseRecords.js'

const EVENTS = 1000
// Many short samples, alternating, and the best of each: on a shared machine the minimum is the
// figure least disturbed by other processes.
const ROUNDS = 10
const SAMPLES = Number(process.env.ACKLINE_BENCH_SAMPLES ?? 60)

const records: JsonObject[] = Array.from({ length: EVENTS }, (_, i) => ({
  timestamp: new Date(1_700_000_000_000 + i).toISOString(),
  level: i % 10 === 0 ? 'error' : 'info',
  message: `request ${i} served in ${i % 97} ms — café ✓`,
  http: { method: 'POST', path: '/v1/items', status: 200, bytes: 1024 + i },
  tags: ['edge', 'eu-west-1', `shard-${i % 8}`],
}))
const bodies = {
  json: Buffer.from(JSON.stringify(records)),
  ndjson: Buffer.from(records.map((r) => JSON.stringify(r)).join('\n')),
}

let sink = 0 // keeps results observable so no loop is optimised away

function safe(body: Buffer, format: 'json' | 'ndjson'): void {
  const text = decodeUtf8(body, false)
  if (!text.ok) throw new Error('bench body is not UTF-8')
  const parsed = parseRecords(text.text, format, 64, EVENTS)
  if (!parsed.ok) throw new Error(parsed.code)
  sink += parsed.records.length
}

function baseline(body: Buffer, format: 'json' | 'ndjson'): void {
  const text = body.toString('utf8')
  const values: unknown[] =
    format === 'json' ? (JSON.parse(text) as unknown[]) : text.split('\n').map((line) => JSON.parse(line))
  for (const v of values) if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('bad')
  sink += values.length
}

function time(run: () => void): number {
  const start = process.hrtime.bigint()
  for (let r = 0; r < ROUNDS; r++) run()
  return Number(process.hrtime.bigint() - start) / 1e6
}

console.log(
  `${EVENTS} events per body; ${SAMPLES} samples of ${ROUNDS} bodies each, alternating, best sample\n`,
)
console.log('| layout | bytes | baseline MB/s | safe MB/s | safe / baseline time |')
console.log('| ------ | ----- | ------------- | --------- | -------------------- |')
for (const format of ['json', 'ndjson'] as const) {
  const body = bodies[format]
  let bestBase = Number.POSITIVE_INFINITY
  let bestSafe = Number.POSITIVE_INFINITY
  for (let k = 0; k < SAMPLES; k++) {
    bestBase = Math.min(
      bestBase,
      time(() => baseline(body, format)),
    )
    bestSafe = Math.min(
      bestSafe,
      time(() => safe(body, format)),
    )
  }
  const mbps = (ms: number) => ((body.length * ROUNDS) / 1e6 / (ms / 1000)).toFixed(0)
  console.log(
    `| ${format} | ${body.length} | ${mbps(bestBase)} | ${mbps(bestSafe)} | ${(bestSafe / bestBase).toFixed(2)} |`,
  )
}
if (sink === 0) console.log('(nothing parsed)')
