/**
 * Which failure of a JetStream request at start is the servers' or the user's, and which is the
 * server's answer about the stream or consumer named. Internal module: imported by path. The
 * errors are made as the client makes them (their names and messages, as nats.js 3 words them);
 * the integration tests meet the real ones for a request that gets no answer.
 */
import { JetStreamApiError } from '@nats-io/jetstream'
import { describe, expect, it } from 'vitest'
import { jetstreamUnavailable } from '../src/internal/jetstreamUnavailable.js'

const named = (name: string, message: string): Error => Object.assign(new Error(message), { name })

describe('jetstreamUnavailable', () => {
  it('leaves the server’s answer about the stream or consumer to the caller', () => {
    const answer = new JetStreamApiError({ err_code: 10014, code: 404, description: 'consumer not found' })
    expect(jetstreamUnavailable('in', 'a:4222', 'the request for consumer', answer)).toBeUndefined()
  })

  it('leaves a name the client refuses to the caller, who names its field', () => {
    const refused = named('InvalidNameError', "durable name ('bad.name') cannot contain '.'")
    expect(jetstreamUnavailable('in', 'a:4222', 'the request for consumer', refused)).toBeUndefined()
  })

  it('names the servers for JetStream unavailable (an answer of status 503)', () => {
    const unavailable = new JetStreamApiError({
      err_code: 10008,
      code: 503,
      description: 'JetStream system temporarily unavailable',
    })
    expect(jetstreamUnavailable('in', 'a:4222', "the request for consumer 'c'", unavailable)).toMatchObject({
      code: 'CONNECT_FAILED',
      field: 'servers',
      message:
        "in (servers): JetStream is unavailable for the request for consumer 'c' (servers a:4222): JetStreamApiError: JetStream system temporarily unavailable",
    })
  })

  it.each([
    [
      'a request with no answer',
      named('TimeoutError', 'timeout'),
      'CONNECT_FAILED',
      'servers',
      "in (servers): JetStream did not answer the request for consumer 'c' (servers a:4222, b:4222): TimeoutError: timeout",
    ],
    [
      'JetStream not enabled',
      named('JetStreamNotEnabled', 'jetstream is not enabled'),
      'CONNECT_FAILED',
      'servers',
      "in (servers): JetStream is not enabled, on the server or for this user's account (servers a:4222, b:4222): JetStreamNotEnabled: jetstream is not enabled",
    ],
    [
      'a user not allowed the request',
      named('PermissionViolationError', 'Permissions Violation for Publish to "$JS.API.CONSUMER.INFO.S.c"'),
      'AUTH_FAILED',
      'user',
      `in (user): the server refused this user the request for consumer 'c' (servers a:4222, b:4222): PermissionViolationError: Permissions Violation for Publish to "$JS.API.CONSUMER.INFO.S.c"`,
    ],
  ])('names the servers or the user for %s', (_, error, code, field, message) => {
    const failure = jetstreamUnavailable('in', ['a:4222', 'b:4222'], "the request for consumer 'c'", error)
    expect(failure).toMatchObject({ code, field, component: 'in', message, cause: error })
  })
})
