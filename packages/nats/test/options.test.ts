import {
  JetStreamSinkOptions,
  JetStreamSourceOptions,
  jetstream,
  jetstreamSink,
  natsSink,
} from '@ackline/nats'
import { type Source, TopologyBuilder, TopologyError } from '@ackline/topology'
import { describe, expect, it } from 'vitest'

describe('options', () => {
  it('the source needs servers, stream and consumer, and names each missing one', () => {
    const fields = JetStreamSourceOptions.validate({}).map((issue) => issue.field)
    expect(fields).toEqual(expect.arrayContaining(['servers', 'stream', 'consumer']))
  })

  it('a misspelt source option is reported', () => {
    const issues = jetstream({
      servers: 'x:4222',
      stream: 's',
      consumer: 'c',
      batchsize: 5,
    } as never).validate()
    expect(issues.map((i) => i.field)).toContain('batchsize')
  })

  it.each(['bad.name', 'has space', 'a*', 'a>', 'a/b', 'a\\b'])(
    'a stream or consumer name the client would refuse (%s) is reported at build, by its field',
    (name) => {
      const stream = JetStreamSourceOptions.validate({ servers: 'x', stream: name, consumer: 'c' })
      expect(stream).toMatchObject([
        { field: 'stream', message: expect.stringContaining("cannot contain '.'") },
      ])
      const consumer = JetStreamSourceOptions.validate({ servers: 'x', stream: 's', consumer: name })
      expect(consumer.map((i) => i.field)).toEqual(['consumer'])
    },
  )

  it('timeouts longer than a timer holds are reported', () => {
    const source = JetStreamSourceOptions.validate({
      servers: 'x',
      stream: 's',
      consumer: 'c',
      apiTimeoutMs: 2 ** 31,
    })
    expect(source.map((i) => i.field)).toEqual(['apiTimeoutMs'])
    const sink = JetStreamSinkOptions.validate({ servers: 'x', subject: 'y', timeoutMs: 2 ** 31 })
    expect(sink.map((i) => i.field)).toEqual(['timeoutMs'])
    const core = natsSink({ servers: 'x', subject: 'y', timeoutMs: 2 ** 31 }).validate()
    expect(core.map((i) => i.field)).toEqual(['timeoutMs'])
    expect(natsSink({ servers: 'x', subject: 'y', timeoutMs: 2 ** 31 - 1 }).validate()).toEqual([])
  })

  it.each(['connectTimeoutMs', 'reconnectTimeWaitMs', 'closeTimeoutMs'])(
    'a %s longer than a timer holds is reported by every component, not taken as 1 ms',
    (field) => {
      const long = { [field]: 2 ** 31 }
      const source = JetStreamSourceOptions.validate({ servers: 'x', stream: 's', consumer: 'c', ...long })
      expect(source.map((i) => i.field)).toEqual([field])
      expect(
        jetstreamSink({ servers: 'x', subject: 'y', ...long })
          .validate()
          .map((i) => i.field),
      ).toEqual([field])
      expect(
        natsSink({ servers: 'x', subject: 'y', ...long })
          .validate()
          .map((i) => i.field),
      ).toEqual([field])
    },
  )

  it('the source fills in defaults', () => {
    const o = JetStreamSourceOptions.resolve({ servers: 'x', stream: 's', consumer: 'c' })
    expect(o).toMatchObject({
      batchSize: 100,
      invalidJson: 'reject',
      metadataField: '_nats',
      doubleAck: false,
      create: true,
    })
  })

  it('a nak cap below the first nak delay is reported', () => {
    const issues = jetstream({
      servers: 'x',
      stream: 's',
      consumer: 'c',
      nakInitialMs: 5000,
      nakMaxMs: 10,
    }).validate()
    expect(issues.map((i) => i.field)).toEqual(['nakMaxMs'])
  })

  it('a first nak delay of 0 is reported, by its field: every later delay is a multiple of it, so an errored message would come back at once, for ever', () => {
    // nakInitialMs 0 made every delay 0 (0 · multiplier^n), and nak(0) is a plain nak: the server
    // redelivered an errored message at once on every delivery, the hot loop the back-off exists
    // to prevent, whatever nakMaxMs said.
    const base = { servers: 'x', stream: 's', consumer: 'c' }
    expect(jetstream({ ...base, nakInitialMs: 0 }).validate()).toMatchObject([
      { field: 'nakInitialMs', message: expect.stringContaining('from 1'), got: '0' },
    ])
    expect(jetstream({ ...base, nakInitialMs: 1 }).validate()).toEqual([])
  })

  it('a rawField that is the metadataField is reported at build, by its field: the metadata would overwrite the payload', () => {
    // A payload that is not a JSON object goes to rawField, then the metadata to metadataField: with
    // one name for both, the event held the metadata alone and was acked, its payload gone.
    const base = { servers: 'x', stream: 's', consumer: 'c' }
    expect(jetstream({ ...base, rawField: '_nats' }).validate()).toMatchObject([
      { field: 'rawField', message: expect.stringContaining('metadataField') },
    ])
    expect(
      jetstream({ ...base, metadataField: 'message' })
        .validate()
        .map((i) => i.field),
    ).toEqual(['rawField'])
    expect(jetstream({ ...base, rawField: 'meta', metadataField: 'meta' }).validate()).toHaveLength(1)
    expect(jetstream({ ...base, rawField: '_nats', metadataField: false }).validate()).toEqual([])
    expect(jetstream({ ...base, rawField: 'raw', metadataField: 'meta' }).validate()).toEqual([])
  })

  it.each(['nakInitialMs', 'nakMaxMs', 'fetchExpiresMs'])(
    'a %s longer than the server reads (a 64-bit count of nanoseconds) is reported, by its field',
    (field) => {
      // One ms more than (2^63 - 1) ns: the server 2.9 ignored such a nak delay (redelivered at
      // once) and refused every pull with such an expiry ('bad request').
      const longest = { servers: 'x', stream: 's', consumer: 'c', nakMaxMs: 9_223_372_036_854 }
      expect(JetStreamSourceOptions.validate({ ...longest, [field]: 9_223_372_036_854 })).toEqual([])
      const issues = JetStreamSourceOptions.validate({ ...longest, [field]: 9_223_372_036_855 })
      expect(issues.map((i) => i.field)).toEqual([field])
    },
  )

  it('an ackWaitMs longer than the server reads is reported at build, by its field', () => {
    // One ms more than (2^63 - 1) ns: the server refused to create the consumer ('invalid JSON'),
    // which failed the run as NO_CONSUMER on the field 'consumer'.
    const base = { servers: 'x', stream: 's', consumer: 'c' }
    expect(JetStreamSourceOptions.validate({ ...base, ackWaitMs: 9_223_372_036_854 })).toEqual([])
    const issues = JetStreamSourceOptions.validate({ ...base, ackWaitMs: 9_223_372_036_855 })
    expect(issues.map((i) => i.field)).toEqual(['ackWaitMs'])
  })

  it('the JetStream sink needs a subject', () => {
    expect(JetStreamSinkOptions.validate({ servers: 'x' }).map((i) => i.field)).toEqual(['subject'])
    expect(jetstreamSink({ servers: 'x', subject: 'a.b' }).validate()).toEqual([])
  })

  it.each(['has space', 'tab\there', 'line\nbreak'])(
    'a subject the client refuses on every publish (%j) is reported at build, by its field',
    (subject) => {
      expect(natsSink({ servers: 'x', subject }).validate()).toMatchObject([{ field: 'subject' }])
      expect(jetstreamSink({ servers: 'x', subject }).validate()).toMatchObject([{ field: 'subject' }])
    },
  )

  it.each(['orders..new', '.orders', 'orders.', '.'])(
    'a subject with an empty token (%j), which the server drops on every publish, is reported at build, by its field',
    (subject) => {
      // NATS 2.9 (tried): a core publish to it reaches no subscriber, not even one on '>', and a
      // JetStream publish gets no answer ('jetstream is not enabled'), though the stream lookup at
      // start matches it: every event errored for ever, or was dropped without a word.
      expect(natsSink({ servers: 'x', subject }).validate()).toMatchObject([{ field: 'subject' }])
      expect(jetstreamSink({ servers: 'x', subject }).validate()).toMatchObject([{ field: 'subject' }])
    },
  )

  it('the core NATS sink says it cannot acknowledge, and takes acknowledgements only as false', () => {
    expect(natsSink({ servers: 'x', subject: 'a' }).canAcknowledge).toBe(false)
    expect(natsSink({ servers: 'x', subject: 'a' }).validate()).toEqual([])
    expect(natsSink({ servers: 'x', subject: 'a', acknowledgements: false }).validate()).toEqual([])
    const issues = natsSink({ servers: 'x', subject: 'a', acknowledgements: true as false }).validate()
    expect(issues.map((i) => i.field)).toEqual(['acknowledgements'])
  })

  it('options have a JSON Schema for config files', () => {
    const schema = JetStreamSourceOptions.jsonSchema() as { properties: Record<string, unknown> }
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining(['stream', 'consumer', 'invalidJson']),
    )
    expect(Object.keys(schema.properties)).not.toContain('onWarning')
  })
})

describe('a credential in the build error', () => {
  it('a wrongly typed pass or token is shown by its kind only, never its value', () => {
    // A number is no string: the build error said `got 12345`, the password itself.
    const source: Source = { kind: 'idle', canAcknowledge: true, run: async () => undefined }
    let error: unknown
    try {
      new TopologyBuilder({ acknowledgements: false, onWarning: () => {} })
        .source('in', source)
        .sink('bus', ['in'], natsSink({ servers: 'x', subject: 's', pass: 12345, token: 67890 } as never), {
          acknowledgements: false,
        })
        .build()
    } catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(TopologyError)
    const problems = (error as TopologyError).problems
    expect(problems.map((p) => [p.field, p.got])).toEqual([
      ['pass', 'a number'],
      ['token', 'a number'],
    ])
    expect((error as TopologyError).message).not.toMatch(/12345|67890/)
  })
})
