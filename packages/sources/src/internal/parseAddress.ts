/**
 * `'host:port'` addresses, as the sources' `address` options take them (`'127.0.0.1:8686'`,
 * `'0.0.0.0:80'`, `'[::1]:8686'`). Port 0 asks the system for a free port.
 */

export interface HostPort {
  readonly host: string
  readonly port: number
}

/** The host and port of `address`, or `undefined` when it is not `host:port`. */
export function parseAddress(address: unknown): HostPort | undefined {
  if (typeof address !== 'string') return undefined
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(address)
  if (match === null) return undefined
  const port = Number(match[3])
  if (port > 65535) return undefined
  return { host: (match[1] ?? match[2])!, port }
}
