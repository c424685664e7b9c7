// The built-in http_server source against the testkit's source conformance suite: each feed is
// one POST, and the response is what the upstream hears (200: acknowledged; anything else:
// failed back, for the client to retry).
import type { JsonObject } from '@ackline/core'
import { httpServer } from '@ackline/sources'
import { sourceConformance } from '@ackline/testkit'
import { describe, it } from 'vitest'

sourceConformance(
  'http_server source conformance',
  () => {
    const source = httpServer({ address: '127.0.0.1:0' })
    const acked: JsonObject[] = []
    const failed: JsonObject[] = []
    return {
      source,
      feed: async (records) => {
        const { port } = await source.listening()
        // The response comes once the batch resolved: do not wait for it here.
        void fetch(`http://127.0.0.1:${port}/`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(records),
        }).then(
          (response) => (response.status === 200 ? acked : failed).push(...records),
          () => failed.push(...records),
        )
      },
      upstream: () => ({ acked, failed }),
    }
  },
  { runner: { describe, it } },
)
