// A unit test of an internal module (src/internal/EventRecord.ts), so it imports it by path: how
// the disk edge stores an event is not part of the package's API, but records written by one
// version must read back in the next, so the text must stay what it always was.
import { type JsonObject, LogEvent } from '@ackline/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { EventRecord } from '../src/internal/EventRecord.js'

// Any UTF-16 text, lone surrogates included: what needs escaping is escaped alike.
const text = fc.string({ unit: 'binary' })
const fields = fc.dictionary(
  text,
  fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }),
) as fc.Arbitrary<JsonObject>
const event = fc.record({
  fields,
  sourceId: fc.option(fc.oneof(fc.constantFrom('http', '', 'a"quote', '\u2028', '\ud800'), text), {
    nil: undefined,
  }),
  ingestTimestamp: fc.oneof(
    fc.constantFrom(1_764_510_000_000, 0, -0, 1e21, 2 ** 48 - 1),
    fc.integer({ min: 0, max: 2 ** 48 }),
  ),
})

describe('EventRecord', () => {
  it('encodes an event as the JSON array [fields, sourceId or null, ingestTimestamp], whatever came before', () => {
    // Runs of events, so the texts kept from the event before (source id, timestamp) are both
    // reused and replaced.
    fc.assert(
      fc.property(fc.array(event, { minLength: 1, maxLength: 8 }), (events) => {
        for (const e of events) {
          const logEvent = new LogEvent(e.fields, {
            sourceId: e.sourceId,
            ingestTimestamp: e.ingestTimestamp,
          })
          const { sourceId, ingestTimestamp } = logEvent.metadata
          const record = EventRecord.encode(logEvent)
          expect(record).toBe(JSON.stringify([e.fields, sourceId ?? null, ingestTimestamp]))
          const data = EventRecord.decode(Buffer.from(record, 'utf8'))
          expect(data).toEqual({ fields: JSON.parse(JSON.stringify(e.fields)), sourceId, ingestTimestamp })
        }
      }),
      { numRuns: 300 },
    )
  })

  it('decodes nothing but an event record', () => {
    for (const text of [
      '',
      'null',
      '{}',
      '[{},null]',
      '[[],null,1]',
      '[{},null,"1"]',
      '[{},null,1,2]',
      '[{',
    ]) {
      expect(EventRecord.decode(Buffer.from(text))).toBeUndefined()
    }
    expect(EventRecord.decode(Buffer.from('[{"a":1},7,2]'))).toEqual({
      fields: { a: 1 },
      sourceId: undefined,
      ingestTimestamp: 2,
    })
  })
})
