/**
 * The connection options every component of `@ackline/nats` declares, in one place.
 *
 * @module
 */
import { MAX_TIMER_MS } from '@ackline/topology'
import { z } from 'zod'

const servers = z
  .union([z.string().min(1), z.array(z.string().min(1)).min(1)])
  .describe('The NATS servers: `host:port` or `nats://host:port`, one or several.')

/** The connection options every component of this package shares. */
export const connectionShape = {
  servers,
  user: z.string().optional().describe('User name, for user/password authentication.'),
  pass: z.string().optional().describe('Password, for user/password authentication.'),
  token: z.string().optional().describe('Token, for token authentication.'),
  name: z.string().optional().describe("The connection's name as the server shows it."),
  // Never longer than a timer waits: a longer one fires after 1 ms (the first connect then fails at
  // once as a timeout, and the wait between reconnects, or after a failed pull, becomes a 1 ms loop).
  connectTimeoutMs: z
    .int()
    .min(1)
    .max(MAX_TIMER_MS)
    .default(5000)
    .describe('How long the first connect may take, in ms.'),
  closeTimeoutMs: z
    .int()
    .min(1)
    .max(MAX_TIMER_MS)
    .default(2000)
    .describe(
      'How long a stop waits for the server to confirm (a flush) that it read what was sent last, such as the acks of a clean stop, before it closes the connection anyway, in ms: a server that stopped reading, or a half-open link, would otherwise hold the stop. What it did not confirm may be lost (the source warns: those messages may be delivered again).',
    ),
  reconnectTimeWaitMs: z
    .int()
    .min(0)
    .max(MAX_TIMER_MS)
    .default(1000)
    .describe('The wait between two reconnect attempts to one server, in ms (the client adds jitter).'),
} as const
