/**
 * One HTTP request to a source under test, on a fresh connection (no keep-alive, so a test never
 * depends on a pooled socket), answered as status, headers and parsed JSON body.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'

export interface HttpAnswer {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field in tests.
  readonly body: any
}

export interface HttpRequestOptions {
  readonly method?: string
  readonly headers?: Record<string, string | number>
  /** The whole body, or chunks written one by one (chunked encoding); bytes as they are. */
  readonly body?: string | Uint8Array | readonly (string | Uint8Array)[]
  readonly path?: string
}

export function request(port: number, options: HttpRequestOptions = {}): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'POST',
        path: options.path ?? '/',
        headers: options.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            body: text === '' ? undefined : JSON.parse(text),
          })
        })
        res.on('error', reject)
      },
    )
    // The server may answer (413, 401) and close before it read the whole body: that is not a
    // failure, as long as the answer arrives; a connection that closes without one is.
    let failed: Error | undefined
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error)
      else failed = error
    })
    req.on('close', () => {
      if (failed !== undefined) reject(new Error(`no response: ${failed.message}`, { cause: failed }))
    })
    const body = options.body
    if (Array.isArray(body)) for (const chunk of body) req.write(chunk)
    else if (body !== undefined) req.write(body)
    req.end()
  })
}
