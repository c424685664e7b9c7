// The built-in fromObservable against the testkit's source conformance suite: records are fed
// through a Subject, and `onAck` is what its upstream hears.
import type { JsonObject } from '@ackline/core'
import { fromObservable } from '@ackline/sources'
import { sourceConformance } from '@ackline/testkit'
import { Subject } from 'rxjs'
import { describe, it } from 'vitest'

sourceConformance(
  'fromObservable source conformance',
  () => {
    const subject = new Subject<JsonObject>()
    const acked: JsonObject[] = []
    const failed: JsonObject[] = []
    const source = fromObservable(subject, {
      onAck: ({ record, status }) => (status === 'delivered' ? acked : failed).push(record),
    })
    return {
      source,
      feed: (records) => {
        for (const record of records) subject.next(record)
      },
      end: () => subject.complete(),
      upstream: () => ({ acked, failed }),
    }
  },
  { runner: { describe, it } },
)
