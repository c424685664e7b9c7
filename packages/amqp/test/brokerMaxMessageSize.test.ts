/** The broker's message size limit, read from the words RabbitMQ closes a channel with. Internal module: imported by path. */
import { describe, expect, it } from 'vitest'
import { brokerMaxMessageSize } from '../src/internal/brokerMaxMessageSize.js'

describe('brokerMaxMessageSize', () => {
  it.each([
    [
      'a configured limit (RabbitMQ 3.10, as the close reads)',
      'Channel closed by server: 406 (PRECONDITION-FAILED) with message "PRECONDITION_FAILED - message size 135266314 is larger than configured max size 134217728"',
      134217728,
    ],
    [
      'the hard cap, which RabbitMQ names without "configured"',
      'Channel closed by server: 406 (PRECONDITION-FAILED) with message "PRECONDITION_FAILED - message size 536870913 is larger than max size 536870912"',
      536870912,
    ],
    [
      'another close',
      'Channel closed by server: 404 (NOT-FOUND) with message "NOT_FOUND - no exchange \'x\'"',
      undefined,
    ],
  ])('%s', (_, message, limit) => {
    expect(brokerMaxMessageSize(new Error(message))).toBe(limit)
  })
})
