import { AmqpSinkOptions, AmqpSourceOptions, amqpSink, amqpSource } from '@ackline/amqp'
import { type Source, TopologyBuilder, TopologyError } from '@ackline/topology'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { backoffDelay, connectFailure, describeServer } from '../src/internal/Connection.js'
import { headersToJson } from '../src/internal/headersToJson.js'

describe('amqp options', () => {
  it('source: url and queue are required, defaults fill the rest', () => {
    expect(amqpSource({ url: 'amqp://h', queue: 'q' }).validate()).toEqual([])
    const fields = AmqpSourceOptions.validate({ prefetch: 0, invalidJson: 'drop' }).map(
      (issue) => issue.field,
    )
    expect(fields.sort()).toEqual(['invalidJson', 'prefetch', 'queue', 'url'])
    expect(AmqpSourceOptions.resolve({ url: 'amqp://h', queue: 'q' })).toMatchObject({
      prefetch: 100,
      maxAttempts: 5,
      invalidJson: 'raw',
      metadataField: '_amqp',
    })
  })

  it('source: metadataField takes a field name or false (no metadata), nothing else', () => {
    expect(amqpSource({ url: 'amqp://h', queue: 'q', metadataField: false }).validate()).toEqual([])
    expect(AmqpSourceOptions.validate({ url: 'amqp://h', queue: 'q', metadataField: true })).toHaveLength(1)
    expect(AmqpSourceOptions.validate({ url: 'amqp://h', queue: 'q', metadataField: '' })).toHaveLength(1)
  })

  it("source: metadataField 'message' is refused naming it: the metadata replaced a raw or non-object payload, which goes to message", () => {
    // A payload that is not JSON ('raw') or not an object became { message: payload }, then the
    // metadata was written under the same name: the event held the metadata, the payload lost.
    const issues = amqpSource({ url: 'amqp://h', queue: 'q', metadataField: 'message' }).validate()
    expect(issues.map((issue) => issue.field)).toEqual(['metadataField'])
    expect(issues[0]?.message).toMatch(/raw or non-object payload/)
    expect(amqpSource({ url: 'amqp://h', queue: 'q', metadataField: 'meta' }).validate()).toEqual([])
  })

  it('source: a misspelt option is reported, not ignored', () => {
    expect(AmqpSourceOptions.validate({ url: 'amqp://h', queue: 'q', prefech: 10 }).length).toBe(1)
  })

  it('sink: mandatory and persistent default on; a bad declaration names its field', () => {
    expect(amqpSink({ url: 'amqp://h' }).validate()).toEqual([])
    expect(AmqpSinkOptions.resolve({ url: 'amqp://h' })).toMatchObject({
      mandatory: true,
      persistent: true,
      exchange: '',
    })
    const issues = AmqpSinkOptions.validate({
      url: 'amqp://h',
      declare: { exchange: { type: 'round-robin' } },
    })
    expect(issues.map((issue) => issue.field)).toEqual(['declare.exchange.type'])
  })

  it('closeTimeoutMs (how long a stop waits for the broker) defaults to 5 s and holds in a timer', () => {
    expect(AmqpSourceOptions.resolve({ url: 'amqp://h', queue: 'q' }).closeTimeoutMs).toBe(5000)
    expect(AmqpSinkOptions.resolve({ url: 'amqp://h' }).closeTimeoutMs).toBe(5000)
    for (const closeTimeoutMs of [0, 2 ** 31]) {
      const source = AmqpSourceOptions.validate({ url: 'amqp://h', queue: 'q', closeTimeoutMs })
      expect(source.map((issue) => issue.field)).toEqual(['closeTimeoutMs'])
      expect(
        AmqpSinkOptions.validate({ url: 'amqp://h', closeTimeoutMs }).map((issue) => issue.field),
      ).toEqual(['closeTimeoutMs'])
    }
  })

  it('reconnectInitialDelayMs is at least 1 ms: doubling 0 never backs off, a reconnect loop while the broker is away', () => {
    // With 0 every delay was 0 (0 doubled is 0, whatever reconnectMaxDelayMs): against a broker
    // that was down, a sink reconnected and warned some 300 times a second, for as long as it was.
    for (const reconnectInitialDelayMs of [0, -1]) {
      expect(
        AmqpSourceOptions.validate({ url: 'amqp://h', queue: 'q', reconnectInitialDelayMs }).map(
          (i) => i.field,
        ),
      ).toEqual(['reconnectInitialDelayMs'])
      expect(
        AmqpSinkOptions.validate({ url: 'amqp://h', reconnectInitialDelayMs }).map((issue) => issue.field),
      ).toEqual(['reconnectInitialDelayMs'])
    }
    expect(AmqpSinkOptions.validate({ url: 'amqp://h', reconnectInitialDelayMs: 1 })).toEqual([])
    // From the smallest first delay, the back-off still reaches its cap.
    expect(backoffDelay({ initialDelayMs: 1, maxDelayMs: 10_000 }, 15)).toBe(10_000)
  })

  it('reconnectMaxDelayMs is at least 1 ms: a cap of 0 made every reconnect delay 0, whatever the first delay', () => {
    // backoffDelay takes the smallest of the doubled first delay and the cap: with a cap of 0 every
    // delay was 0, the reconnect loop the 1 ms floor of reconnectInitialDelayMs was meant to end.
    expect(backoffDelay({ initialDelayMs: 100, maxDelayMs: 0 }, 3)).toBe(0)
    for (const reconnectMaxDelayMs of [0, -1]) {
      expect(
        AmqpSourceOptions.validate({ url: 'amqp://h', queue: 'q', reconnectMaxDelayMs }).map((i) => i.field),
      ).toEqual(['reconnectMaxDelayMs'])
      expect(AmqpSinkOptions.validate({ url: 'amqp://h', reconnectMaxDelayMs }).map((i) => i.field)).toEqual([
        'reconnectMaxDelayMs',
      ])
    }
    expect(AmqpSinkOptions.validate({ url: 'amqp://h', reconnectMaxDelayMs: 1 })).toEqual([])
  })

  it('names longer than AMQP carries (255 bytes of UTF-8) are refused at build, naming the field', () => {
    // amqplib cannot encode a longer short string: the source's run and the sink's start failed
    // naming the url ('cannot connect'), and a long routingKey passed start and rejected every
    // event. 128 two-byte characters are 256 bytes though only 128 characters.
    const long = 'é'.repeat(128)
    const fits = 'q'.repeat(255)
    expect(
      AmqpSourceOptions.validate({ url: 'amqp://h', queue: long, deadLetterExchange: long }).map(
        (i) => i.field,
      ),
    ).toEqual(['queue', 'deadLetterExchange'])
    expect(AmqpSourceOptions.validate({ url: 'amqp://h', queue: fits, deadLetterExchange: fits })).toEqual([])
    const sink = AmqpSinkOptions.validate({
      url: 'amqp://h',
      exchange: long,
      routingKey: long,
      declare: { queue: { name: long, bindingKey: long } },
    })
    expect(sink.map((issue) => issue.field)).toEqual([
      'exchange',
      'routingKey',
      'declare.queue.name',
      'declare.queue.bindingKey',
    ])
    expect(sink[0]?.message).toMatch(/at most 255 bytes/)
    expect(
      AmqpSinkOptions.validate({
        url: 'amqp://h',
        exchange: fits,
        routingKey: fits,
        declare: { queue: { name: fits, bindingKey: fits } },
      }),
    ).toEqual([])
  })

  it('a url amqplib cannot connect with (not a URL, or not amqp: or amqps:) is refused at build, naming the field, never showing its password', () => {
    // amqplib throws on it at every connect: the source's run and the sink's start failed as a
    // failed connect, the server shown garbled ('cannot connect to localhost://:56725672').
    for (const url of ['localhost:5672', 'http://guest:s3cret@127.0.0.1:5672', '127.0.0.1', 'amqp//h']) {
      const source = amqpSource({ url, queue: 'q' }).validate()
      const sink = amqpSink({ url }).validate()
      expect(source.map((issue) => issue.field)).toEqual(['url'])
      expect(sink.map((issue) => issue.field)).toEqual(['url'])
      expect(source[0]?.message).toMatch(/amqp:\/\/ or amqps:\/\//)
      expect(JSON.stringify([source, sink])).not.toContain('s3cret')
    }
    for (const url of ['amqp://h', 'AMQP://h', 'amqps://u:p@h:5671/v?heartbeat=5', 'amqp://[::1]:5672']) {
      expect(amqpSource({ url, queue: 'q' }).validate()).toEqual([])
      expect(amqpSink({ url }).validate()).toEqual([])
    }
  })

  it("a url whose password holds an unescaped '/', '?' or '#' is refused with a hint to percent-encode it, never showing the password", () => {
    // `new URL` reads what follows such a character as a port, a path or a query: the issue said
    // only that an AMQP URL was expected, and the URL looked like one.
    for (const url of [
      'amqp://guest:pa/ss@127.0.0.1:5672/v',
      'amqp://guest:pa?ss@h',
      'amqps://u:p#ss@h:5671',
    ]) {
      const source = amqpSource({ url, queue: 'q' }).validate()
      const sink = amqpSink({ url }).validate()
      expect(source.map((issue) => issue.field)).toEqual(['url'])
      expect(sink.map((issue) => issue.field)).toEqual(['url'])
      for (const issue of [source[0], sink[0]]) {
        expect(issue?.message).toMatch(/percent-encode them/)
        expect(issue?.message).toContain("'/' is %2F")
        expect(issue?.message).toContain("'@' %40")
      }
      expect(JSON.stringify([source, sink])).not.toMatch(/pa\/ss|pa\?ss|p#ss/)
    }
    // '@' and ':' in a password parse (amqplib decodes what `new URL` encoded): nothing to refuse.
    for (const url of ['amqp://guest:p@ss@h', 'amqp://guest:p:ss@h:5672/v']) {
      expect(amqpSource({ url, queue: 'q' }).validate()).toEqual([])
    }
    // No credentials at fault: no hint.
    for (const url of ['localhost:5672', 'http://guest:s3cret@127.0.0.1:5672', 'amqp://h:56x72']) {
      const issues = amqpSink({ url }).validate()
      expect(issues.map((issue) => issue.field)).toEqual(['url'])
      expect(issues[0]?.message).not.toMatch(/percent/)
    }
    // An '@' after a '/' may be in a password or in a path ('amqp://h:56x72/a@b': no credentials,
    // a bad port): the hint says 'if', and did not, telling such a url to encode its user info.
    for (const url of ['amqp://h:56x72/a@b', 'amqp://guest:pa/ss@127.0.0.1:5672/v']) {
      const [issue] = amqpSink({ url }).validate()
      expect(issue?.message).toMatch(
        /if the part before the last '@' is a user and password, percent-encode them/,
      )
    }
  })

  it('a first delay longer than its cap is refused naming the cap: the cap used to win silently', () => {
    // retryInitialDelayMs 60 s with the default retryMaxDelayMs (30 s) held every errored message
    // 30 s; reconnectInitialDelayMs 20 s with the default cap (10 s) reconnected after 10 s.
    const fields = (issues: readonly { field: string }[]) => issues.map((issue) => issue.field)
    expect(
      fields(amqpSource({ url: 'amqp://h', queue: 'q', retryInitialDelayMs: 60_000 }).validate()),
    ).toEqual(['retryMaxDelayMs'])
    expect(
      fields(amqpSource({ url: 'amqp://h', queue: 'q', reconnectInitialDelayMs: 20_000 }).validate()),
    ).toEqual(['reconnectMaxDelayMs'])
    expect(fields(amqpSink({ url: 'amqp://h', reconnectInitialDelayMs: 20_000 }).validate())).toEqual([
      'reconnectMaxDelayMs',
    ])
    expect(
      amqpSource({ url: 'amqp://h', queue: 'q', retryInitialDelayMs: 0, retryMaxDelayMs: 0 }).validate(),
    ).toEqual([])
    expect(
      amqpSource({
        url: 'amqp://h',
        queue: 'q',
        retryInitialDelayMs: 30_000,
        reconnectInitialDelayMs: 10_000,
      }).validate(),
    ).toEqual([])
    expect(amqpSink({ url: 'amqp://h', reconnectInitialDelayMs: 10_000 }).validate()).toEqual([])
    const [issue] = amqpSource({ url: 'amqp://h', queue: 'q', retryInitialDelayMs: 60_000 }).validate()
    expect(issue?.message).toBe('must be at least retryInitialDelayMs (60000), got 30000')
  })

  it('sink: declare.exchange without an exchange is refused: the default exchange cannot be declared, and nothing was', () => {
    const issues = amqpSink({ url: 'amqp://h', declare: { exchange: { type: 'topic' } } }).validate()
    expect(issues.map((issue) => issue.field)).toEqual(['declare.exchange'])
    expect(
      amqpSink({ url: 'amqp://h', exchange: 'x', declare: { exchange: { type: 'topic' } } }).validate(),
    ).toEqual([])
  })

  it('heartbeatSeconds is at most 65535, what AMQP carries (a short): a larger one was cut to the broker value without a word, or failed every connect where the broker value is 0', () => {
    for (const heartbeatSeconds of [65_536, 1e9]) {
      expect(
        AmqpSourceOptions.validate({ url: 'amqp://h', queue: 'q', heartbeatSeconds }).map((i) => i.field),
      ).toEqual(['heartbeatSeconds'])
      expect(AmqpSinkOptions.validate({ url: 'amqp://h', heartbeatSeconds }).map((i) => i.field)).toEqual([
        'heartbeatSeconds',
      ])
    }
    expect(AmqpSinkOptions.validate({ url: 'amqp://h', heartbeatSeconds: 65_535 })).toEqual([])
  })

  it('the JSON Schema leaves out the code-only onWarning', () => {
    const schema = AmqpSourceOptions.jsonSchema() as { properties: Record<string, unknown> }
    expect(Object.keys(schema.properties)).toContain('prefetch')
    expect(Object.keys(schema.properties)).not.toContain('onWarning')
  })
})

describe('Connection helpers', () => {
  it('describes the server without the password', () => {
    expect(describeServer('amqp://guest:secret@127.0.0.1:5672')).toBe('amqp://guest@127.0.0.1:5672')
    expect(describeServer('amqps://u:p@mq.example/prod')).toBe('amqps://u@mq.example:5671/prod')
    expect(describeServer('not a url')).toBe('(unparseable url)')
  })

  it("never shows a password that the url's parse leaves out of its user info: all before the last '@' is hidden", () => {
    // A password of digits before an unescaped '/' parses: host 'user', port 1234, the rest a
    // path. The connect error printed 'cannot connect to amqp://user:1234/abc@broker:5672/'.
    expect(describeServer('amqp://user:1234/abc@broker:5672/')).toBe('amqp://***@broker:5672/')
    expect(describeServer('amqps://u:9/x?y#z@mq.example/prod')).toBe('amqps://***@mq.example/prod')
    expect(describeServer('amqp://u:p@h/v?x=a@b')).toBe('amqp://***@b')
    // No '//': the whole rest is an opaque path, the password in it.
    expect(describeServer('amqp:user:secret@h')).toBe('amqp://***@h')
    for (const url of ['amqp://user:1234/abc@broker:5672/', 'amqp:user:secret@h', 'amqp://u:12#s3cret@h']) {
      expect(describeServer(url)).not.toMatch(/1234|abc|secret|s3cret/)
    }
    // An '@' inside the user info as parsed ('@' in a password parses): the user is shown, as before.
    expect(describeServer('amqp://guest:p@ss@h:5672/v')).toBe('amqp://guest@h:5672/v')
    // No '//' after the scheme, a password that begins with '//' (user ''): its '://' is no
    // scheme's, the whole rest a path. It was read as the url's server part, the '@' in it, and
    // shown: 'amqp://:5672://s3cret@h'.
    expect(describeServer('amqp:://s3cret@h')).toBe('amqp://***@h')
  })

  it("hides all before the url's last '@' when nothing, or only a port and a path, follows it: a user and password with an empty host (the default) read so", () => {
    // 'amqp://${user}:${password}@${host}:5672/v' with the host variable unset and a password
    // '9008/s3cret' written as is parses as host 'guest', port 9008, path '/s3cret@:5672/v'; it
    // was taken for a url whose '@' is its virtual host's, and every connect error and reconnect
    // warning printed 'cannot connect to amqp://guest:9008/s3cret@:5672/v'.
    expect(describeServer('amqp://guest:9008/s3cret@:5672/v')).toBe('amqp://***@:5672/v')
    expect(describeServer('amqp://guest:9008/s3cret@/v')).toBe('amqp://***@/v')
    expect(describeServer('amqp://guest:9008/s3cret@')).toBe('amqp://***@')
    expect(describeServer('amqp://guest:/s3cret@')).toBe('amqp://***@')
    expect(describeServer('amqp::s3cret@?x=')).toBe('amqp://***@')
    // The same shapes with an '@' in the virtual host or a query: the two cannot be told apart.
    expect(describeServer('amqp://u:p@host/v?x=@')).toBe('amqp://***@')
    expect(describeServer('amqp://u:p@host/v@/w')).toBe('amqp://***@/w')
    expect(describeServer('amqp://u:p@host/v@:5672')).toBe('amqp://***@:5672')
    expect(describeServer('amqp://u:p@host:5673/a@')).toBe('amqp://***@')
    // A server after it: hidden, as before.
    expect(describeServer('amqp://guest:guest@127.0.0.1:5672/a@b')).toBe('amqp://***@b')
    expect(describeServer('amqp://u:p@host/v?x=a@b:5672/')).toBe('amqp://***@b:5672/')
    // A percent-encoded '@' is no '@': nothing to hide.
    expect(describeServer('amqp://guest:guest@127.0.0.1:5672/a%40b')).toBe(
      'amqp://guest@127.0.0.1:5672/a%40b',
    )
  })

  it('never shows any character of a password, written as is or percent-encoded, whatever the url around it (property)', () => {
    // Passwords are made of what nothing else in these urls holds (capitals N-Z, the digits 0 8
    // 9, '%', '?', '#'), with the characters that end a url's user info or server part ('/', '?',
    // '#', '@', ':'). Users, hosts, virtual hosts and queries are lowercase a-m; ports are 5672 and
    // 5673 (so 5671 for amqps). The host may be empty, as an AMQP URI allows (the default host) and
    // as a url built from an unset variable is ('amqp://guest:12/ab@:5672/v'). Whatever of a
    // password describeServer showed, or an error naming what amqplib read from the url (its
    // host, port and path), the check below finds.
    const secretChar = fc.constantFrom(...'NOPQRSTUVWXYZ089@/?#%:'.split(''))
    const freePassword = fc.array(secretChar, { minLength: 1, maxLength: 10 }).map((chars) => chars.join(''))
    // Digits, then a raw '/', '?' or '#': parses as a port and a path, query or fragment.
    const portPassword = fc
      .tuple(fc.constantFrom('', '0', '80', '9008'), fc.constantFrom('/', '?', '#'), freePassword)
      .map(([digits, end, rest]) => `${digits}${end}${rest}`)
    const password = fc
      .tuple(fc.oneof(freePassword, portPassword), fc.constantFrom(...'NOPQRSTUVWXYZ'.split('')))
      .map(([chars, capital]) => `${chars}${capital}`)
    const written = fc.oneof(
      password,
      password.map((p) => encodeURIComponent(p)),
      // Some characters encoded, the rest as is.
      fc
        .tuple(password, fc.infiniteStream(fc.boolean()))
        .map(([p, encode]) => [...p].map((c) => (encode.next().value ? encodeURIComponent(c) : c)).join('')),
    )
    const lower = (max: number) =>
      fc.array(fc.constantFrom(...'abcdefghijklm'.split('')), { maxLength: max }).map((c) => c.join(''))
    const tail = (max: number) =>
      fc.array(fc.constantFrom(...'abcdefghijklm@/'.split('')), { maxLength: max }).map((c) => c.join(''))
    const url = fc
      .record({
        scheme: fc.constantFrom('amqp://', 'amqps://', 'amqp:'),
        user: lower(5),
        password: written,
        host: fc.oneof(fc.constant(''), lower(6)),
        port: fc.constantFrom('', ':5672', ':5673'),
        vhost: fc.oneof(
          fc.constant(''),
          tail(6).map((v) => `/${v}`),
        ),
        query: fc.oneof(
          fc.constant(''),
          tail(4).map((q) => `?x=${q}`),
        ),
      })
      .map((u) => ({
        ...u,
        url: `${u.scheme}${u.user}:${u.password}@${u.host}${u.port}${u.vhost}${u.query}`,
      }))
    const secret = /[N-Z089%?#]/
    fc.assert(
      fc.property(url, ({ url }) => {
        const shown = describeServer(url)
        expect(shown, `describeServer('${url}')`).not.toMatch(secret)
        const read = URL.parse(url)
        if (read !== null) {
          // What an OS error says of the address amqplib connected to, read from the url as parsed.
          // (Between '<' and '>': the advice said of a misparsed url names '%2F', '?' and '#'.)
          const error = Object.assign(new Error(`refused at <${read.host}${read.pathname}>`), {
            syscall: 'connect',
            code: 'ECONNREFUSED',
          })
          const { reason } = connectFailure(url, error)
          expect(/<(.*)>/s.exec(reason)?.[1] ?? '', `connectFailure('${url}'): ${reason}`).not.toMatch(secret)
        }
      }),
      { numRuns: 5000 },
    )
  })

  it('backs off reconnects exponentially up to the cap', () => {
    const backoff = { initialDelayMs: 100, maxDelayMs: 1000 }
    expect([1, 2, 3, 4, 5, 60].map((a) => backoffDelay(backoff, a))).toEqual([100, 200, 400, 800, 1000, 1000])
  })

  it('never backs off longer than a timer waits (a longer delay would fire after 1 ms: a reconnect loop)', () => {
    const backoff = { initialDelayMs: 3e9, maxDelayMs: 1e12 }
    expect(backoffDelay(backoff, 1)).toBe(2_147_483_647)
  })
})

describe('headersToJson', () => {
  it("gives back a header named '__proto__' that amqplib's decoding made the table's prototype, as an own field, at any depth", () => {
    // What amqplib's decoding (fields[key] = value) makes of such headers.
    const nested = Object.assign(Object.create({ deep: 1 }) as object, { b: 2 })
    const headers = Object.assign(Object.create(null) as object, { kept: 'yes', nested })
    const json = headersToJson(headers as Record<string, unknown>)
    expect(Object.getPrototypeOf(json)).toBe(Object.prototype)
    expect(Object.entries(json)).toEqual([
      ['__proto__', null],
      ['kept', 'yes'],
      ['nested', expect.anything()],
    ])
    const inner = json.nested as object
    expect(Object.getPrototypeOf(inner)).toBe(Object.prototype)
    expect(Object.entries(inner)).toEqual([
      ['__proto__', { deep: 1 }],
      ['b', 2],
    ])
  })

  it("never throws on a table whose header named '__proto__' holds bytes: the table is no Buffer", () => {
    // amqplib decodes a byte array ('x') as a Buffer, and fields['__proto__'] = it made that
    // Buffer the table's prototype: Buffer.isBuffer(table) is then true, and the table was read
    // as one ('this is not a typed array'), failing the source's run on such a message.
    const bytes = Buffer.from('raw')
    const nested = Object.assign(Object.create(bytes) as object, { b: 2 })
    const json = headersToJson({ nested } as Record<string, unknown>)
    expect(Object.entries(json.nested as object)).toEqual([
      ['__proto__', 'raw'],
      ['b', 2],
    ])
  })

  it('keeps JSON values and turns buffers, dates and bigints into strings', () => {
    const date = new Date(0)
    expect(
      headersToJson({
        s: 'a',
        n: 1,
        b: true,
        nil: null,
        buf: Buffer.from('hi'),
        d: date,
        big: 10n,
        nan: Number.NaN,
        nested: [{ x: Buffer.from('y') }],
      }),
    ).toEqual({
      s: 'a',
      n: 1,
      b: true,
      nil: null,
      buf: 'hi',
      d: date.toISOString(),
      big: '10',
      nan: 'NaN',
      nested: [{ x: 'y' }],
    })
  })
})

describe('a wrongly typed url in the build error', () => {
  // A source that does nothing: only build() runs.
  const source: Source = { kind: 'idle', canAcknowledge: true, run: async () => undefined }
  const buildError = (url: unknown): string => {
    try {
      new TopologyBuilder({ onWarning: () => {} })
        .source('in', source)
        .sink('bus', ['in'], amqpSink({ url } as never))
        .build()
    } catch (error) {
      expect(error).toBeInstanceOf(TopologyError)
      return (error as TopologyError).message
    }
    throw new Error('build() passed')
  }

  it("never holds its password: amqplib's object form, or the URL in an array", () => {
    // The object form is amqplib's own (connect({ hostname, password })); the schema takes a
    // string, and the build error showed the object as JSON, password and all.
    const object = buildError({ hostname: 'h', password: 's3cret' })
    expect(object).toContain('"password":"***"')
    expect(object).not.toContain('s3cret')
    const array = buildError(['amqp://u:s3cret@h'])
    expect(array).toContain('amqp://u:***@h')
    expect(array).not.toContain('s3cret')
  })
})
