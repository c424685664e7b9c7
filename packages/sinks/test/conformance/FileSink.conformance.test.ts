// The built-in file sink against the testkit's sink conformance suite: each sink appends to a
// fresh file that the suite reads back.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { JsonObject } from '@ackline/core'
import { file } from '@ackline/sinks'
import { Arbitraries, sinkConformance } from '@ackline/testkit'
import fc from 'fast-check'
import { afterAll, describe, it } from 'vitest'

const dir = mkdtempSync(join(tmpdir(), 'ackline-file-conformance-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const paths = new WeakMap<object, string>()
let count = 0

const make = () => {
  const path = join(dir, `out-${count++}.ndjson`)
  const sink = file({ path })
  paths.set(sink, path)
  return sink
}
const read = (sink: ReturnType<typeof make>) => {
  let text = ''
  try {
    text = readFileSync(paths.get(sink)!, 'utf8')
  } catch {}
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as JsonObject)
}

sinkConformance('file sink conformance', make, { read, runner: { describe, it } })
// Records as a property draws them: deep and odd JSON, any Unicode (lone surrogates included),
// read back from the file deeply equal.
const drawn = fc.sample(Arbitraries.batches({ minSize: 1, maxSize: 6 }), { numRuns: 1, seed: 3 })[0]!.flat()
sinkConformance('file sink conformance (records drawn by Arbitraries, seed 3)', make, {
  records: drawn,
  read,
  runner: { describe, it },
})
