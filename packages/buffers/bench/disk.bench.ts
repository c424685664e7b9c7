// Disk buffer throughput, each figure beside its baseline on the same disk in the same run:
//   1. sync 'always' appends vs a raw writev + fdatasync loop over the same batches;
//   2. group commit appends vs a raw writev loop without fsync;
//   3. read-and-acknowledge throughput (record store, and events through the edge buffer);
//   4. recovery: the time to open a buffer holding ACKLINE_BENCH_RECOVERY_MB of records.
// 256-byte records in batches of 100. Run with `pnpm bench buffers`.
import { mkdtempSync, rmSync } from 'node:fs'
import { open as openFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DiskBuffer, openDiskBuffer } from '@ackline/buffers'
import { BatchNotifier, EventArray, LogEvent } from '@ackline/core'

const RECORD = 256
const BATCH = 100
const root = mkdtempSync(join(tmpdir(), 'ackline-bench-'))
const batch: Buffer[] = Array.from({ length: BATCH }, (_, i) => Buffer.alloc(RECORD, i))
let dirs = 0
const dir = (): string => join(root, `b${dirs++}`)
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US')

/** Runs `step` (one batch) `warmup` times, then for at least `ms` milliseconds; records/s. */
async function measure(step: () => Promise<void>, ms: number, warmup = 20): Promise<number> {
  for (let i = 0; i < warmup; i++) await step()
  globalThis.gc?.()
  let batches = 0
  const start = performance.now()
  let now = start
  while (now - start < ms) {
    for (let i = 0; i < 10; i++) await step()
    batches += 10
    now = performance.now()
  }
  return (batches * BATCH) / ((now - start) / 1000)
}

/** Raw writes of the same batches; `syncEvery` batches an fdatasync (0: never). */
async function rawLoop(syncEvery: number, ms: number): Promise<number> {
  const file = await openFile(join(root, `raw${dirs++}`), 'a')
  let position = 0
  let writes = 0
  try {
    return await measure(async () => {
      const { bytesWritten } = await file.writev(batch, position)
      position += bytesWritten
      if (syncEvery > 0 && ++writes % syncEvery === 0) await file.datasync()
    }, ms)
  } finally {
    await file.close()
  }
}

async function bufferLoop(
  sync: 'always' | { everyMs: number; everyWrites: number },
  ms: number,
): Promise<number> {
  const buffer = await DiskBuffer.open({ path: dir(), sync, log: () => {} })
  try {
    return await measure(async () => {
      const result = await buffer.append(batch)
      if (result.status !== 'written') throw new Error(`append ${result.status}`)
    }, ms)
  } finally {
    await buffer.close()
  }
}

const row = (label: string, value: number, baseline?: number): void => {
  const ratio = baseline === undefined ? '' : `  (${((value / baseline) * 100).toFixed(0)}% of raw)`
  console.log(`${label.padEnd(52)} ${fmt(value).padStart(12)} records/s${ratio}`)
}

console.log(`records of ${RECORD} bytes, batches of ${BATCH}, in ${root}\n`)

// 1. Durable writes. Interleave buffer and raw twice so drift in the disk's speed hits both.
const durableMs = 1500
const rawSync1 = await rawLoop(1, durableMs)
const always1 = await bufferLoop('always', durableMs)
const rawSync2 = await rawLoop(1, durableMs)
const always2 = await bufferLoop('always', durableMs)
const rawSync = (rawSync1 + rawSync2) / 2
const always = (always1 + always2) / 2
row('raw writev + fdatasync per batch', rawSync)
row("DiskBuffer.append, sync 'always'", always, rawSync)

// 2. Group commit beside writes that are never fsynced.
const fastMs = 1500
const group = { everyMs: 50, everyWrites: 100 }
const raw1 = await rawLoop(0, fastMs)
const group1 = await bufferLoop(group, fastMs)
const rawGroup1 = await rawLoop(group.everyWrites, fastMs)
const raw2 = await rawLoop(0, fastMs)
const group2 = await bufferLoop(group, fastMs)
const rawGroup2 = await rawLoop(group.everyWrites, fastMs)
const raw = (raw1 + raw2) / 2
const grouped = (group1 + group2) / 2
const rawGroup = (rawGroup1 + rawGroup2) / 2
row('raw writev per batch, no fsync', raw)
row(`DiskBuffer.append, group commit ${JSON.stringify(group)}`, grouped, raw)
// The same fsync policy done by hand: what group commit costs the disk, without the buffer.
row(`raw writev per batch, fdatasync every ${group.everyWrites}`, rawGroup)
console.log(
  `${'  group commit vs the same fsync policy by hand'.padEnd(52)} ${((grouped / rawGroup) * 100).toFixed(0).padStart(12)} %`,
)

// 3. Reading back and acknowledging, out of order within each read; the default checkpoint
// (every 1000 acknowledgements) beside checkpoints by time only, alternated, two runs each.
async function readAck(ledgerEveryAcks: number | undefined): Promise<number> {
  const buffer = await DiskBuffer.open({ path: dir(), sync: group, ledgerEveryAcks, log: () => {} })
  const total = 300_000
  for (let i = 0; i < total / BATCH; i++) await buffer.append(batch)
  await buffer.flush()
  globalThis.gc?.()
  const start = performance.now()
  let read = 0
  while (read < total) {
    const records = (await buffer.read(1000))!
    for (let i = records.length - 1; i >= 0; i--) buffer.ack(records[i]!.seq)
    read += records.length
  }
  const rate = read / ((performance.now() - start) / 1000)
  await buffer.close()
  return rate
}
{
  const byTime1 = await readAck(Number.MAX_SAFE_INTEGER)
  const byCount1 = await readAck(undefined)
  const byTime2 = await readAck(Number.MAX_SAFE_INTEGER)
  const byCount2 = await readAck(undefined)
  const byTime = (byTime1 + byTime2) / 2
  row('DiskBuffer read + ack, checkpoint by time only', byTime)
  const byCount = (byCount1 + byCount2) / 2
  row('DiskBuffer read + ack (1000 per read), default checkpoint', byCount)
  console.log(
    `${'  default checkpoint vs by time only'.padEnd(52)} ${((byCount / byTime) * 100).toFixed(0).padStart(12)} %`,
  )
}
{
  const edge = await openDiskBuffer({ path: dir(), sinkId: 'bench', sync: group, log: () => {} })
  const total = 100_000
  const text = 'x'.repeat(RECORD - 40)
  const start = performance.now()
  let delivered = 0
  const consumer = (async () => {
    while (delivered < total) {
      const events = (await edge.pull())!
      delivered += events.length
      events.end('delivered')
    }
  })()
  const receivers = []
  for (let i = 0; i < total / BATCH; i++) {
    const events = Array.from({ length: BATCH }, (_, k) => new LogEvent({ n: i * BATCH + k, text }))
    const { notifier, receiver } = BatchNotifier.create({ sourceId: 'bench' })
    await edge.push(new EventArray(events).attach(notifier))
    receivers.push(receiver.promise)
  }
  await consumer
  await Promise.all(receivers)
  row('openDiskBuffer push + pull + deliver events, end to end', total / ((performance.now() - start) / 1000))
  await edge.dispose()
}

// 4. Recovery: opening a buffer that holds many records (stat every segment, scan the last one).
{
  const megabytes = Number(process.env.ACKLINE_BENCH_RECOVERY_MB ?? 1024)
  const path = dir()
  const big: Buffer[] = Array.from({ length: 1000 }, (_, i) => Buffer.alloc(RECORD, i))
  const writer = await DiskBuffer.open({
    path,
    maxBytes: 2 * megabytes * 1024 * 1024,
    sync: { everyMs: 1000, everyWrites: 1000 },
    log: () => {},
  })
  // Just under the size, so the last segment is (nearly) full: open scans the whole of it.
  const frames = Math.floor((megabytes * 1024 * 1024) / (RECORD + 20) / big.length) * big.length
  for (let written = 0; written < frames; written += big.length) await writer.append(big)
  await writer.close()
  const start = performance.now()
  const reopened = await DiskBuffer.open({ path, maxBytes: 2 * megabytes * 1024 * 1024, log: () => {} })
  const ms = performance.now() - start
  const m = reopened.metrics()
  console.log(
    `${'open (recover) a buffer of'.padEnd(52)} ${(m.bytesOnDisk / 2 ** 20).toFixed(0).padStart(8)} MiB in ${ms.toFixed(0)} ms (${m.segments} segments, ${fmt(m.unackedRecords)} records)`,
  )
  if (process.env.ACKLINE_BENCH_RECOVERY_MB === undefined) {
    console.log('  (size set by ACKLINE_BENCH_RECOVERY_MB, default 1024)')
  }
  await reopened.close()
}

rmSync(root, { recursive: true, force: true })
