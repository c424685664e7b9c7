// The built-in file sink against the testkit's sink conformance suite: each sink appends to a
// fresh file that the suite reads back.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { JsonObject } from '@ackline/core'
import { file } from '@ackline/sinks'
import { sinkConformance } from '@ackline/testkit'
import { afterAll, describe, it } from 'vitest'

const dir = mkdtempSync(join(tmpdir(), 'ackline-file-conformance-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const paths = new WeakMap<object, string>()
let count = 0

sinkConformance(
  'file sink conformance',
  () => {
    const path = join(dir, `out-${count++}.ndjson`)
    const sink = file({ path })
    paths.set(sink, path)
    return sink
  },
  {
    read: (sink) => {
      let text = ''
      try {
        text = readFileSync(paths.get(sink)!, 'utf8')
      } catch {}
      return text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as JsonObject)
    },
    runner: { describe, it },
  },
)
