/**
 * The contract of a buffer that stands in front of a component, and of the factory a sink's
 * `buffer` option names to get one. The runtime's in-memory channel is the default; other kinds
 * (the disk buffer of `@ackline/buffers`, or a third party's) implement this contract in their
 * own package, and the topology knows nothing of them beyond it.
 *
 * Invariant: a buffer never settles an event as delivered on its own (except one that promises
 * durability, such as a disk buffer in `acknowledgements: 'on-write'` mode, once the write is
 * durable). Whatever it accepts it either hands to the sink through `pull`, or settles with a
 * status (`rejected` when full and dropping, `errored` when it cannot store it).
 *
 * @module
 */
import type { EventArray } from '@ackline/core'
import type { ConfigIssue } from './ConfigIssue.js'

/**
 * A buffer between a component's output and a sink.
 *
 * @example
 * ```ts
 * const buffer = await factory.open({ componentId: 'archive', dataDir: undefined })
 * await buffer.push(events)         // ownership of the handles moves in
 * const next = await buffer.pull()  // what the sink writes next
 * ```
 */
export interface EdgeBuffer {
  /**
   * Accepts an array of events; ownership of the handles moves into the buffer. Resolves once
   * accepted: when the buffer is full it waits (back pressure) or settles them, per its policy.
   * Rejecting (or throwing) means it refused them (a disk buffer settles them `errored` first): a
   * source's `send` rejects with the error; pushed by a transform, the runtime settles `errored`
   * whatever handle of the array is still live, reports `WRITE_FAILED` naming the sink, and the
   * transform goes on.
   */
  push(events: EventArray): Promise<void>
  /**
   * The next array for the sink, waiting until one is available. Resolves `undefined` once the
   * buffer is closed and nothing is left to hand out (or `signal` aborted).
   */
  pull(signal?: AbortSignal): Promise<EventArray | undefined>
  /** No more pushes: `pull` drains what is left, then returns `undefined`. */
  close(): Promise<void>
  /**
   * Gives the buffer up without draining it (a stop's deadline passed, or `start()` failed):
   * settle `errored` what waits for an acknowledgement in this process, keep what is durable for
   * the next run, and release files and locks. Without it, the runtime calls `close()`.
   */
  dispose?(): Promise<void>
}

/** Where a buffer stands, as its factory is told when the topology starts. */
export interface EdgeBufferContext {
  /** The id of the component the buffer feeds (a durable buffer names its files after it). */
  readonly componentId: string
  /** The topology's `dataDir`, if set: where a durable buffer keeps its files by default. */
  readonly dataDir: string | undefined
}

/**
 * A directory a buffer writes its files in (its own files, not those of its subdirectories), so
 * that `build()` can refuse two buffers that would write in one.
 *
 * @example
 * ```ts
 * { path: '/var/lib/ackline/archive/dead-letter', holds: 'its dead-letter queue', field: 'path' }
 * ```
 */
export interface EdgeBufferDirectory {
  /** The directory, absolute. */
  readonly path: string
  /** What the buffer keeps there, for messages (`'its records'`, `'its dead-letter queue'`). */
  readonly holds: string
  /** The buffer's option that decides where it is (`'path'`), reported under `buffer.`. */
  readonly field: string
}

/**
 * Makes the buffer in front of a sink: what the sink's `buffer` option takes besides the
 * in-memory channel's options. Options of the buffer kind are the factory's business; the
 * topology only asks it to check them (at `build()`) and to open a buffer (at `start()`). One
 * factory may serve several sinks: `open` is called once for each, with that sink's context.
 *
 * @example
 * ```ts
 * import { diskBuffer } from '@ackline/buffers'
 * builder.sink('archive', ['parse'], s3, { buffer: diskBuffer({ maxBytes: 1 << 30 }) })
 * ```
 */
export interface EdgeBufferFactory {
  /** The kind of buffer, for messages (`"disk"`). */
  readonly kind: string
  /**
   * Problems in the buffer's options for this component; `build()` reports them with every other
   * problem, as fields under `buffer.` (`buffer.maxBytes`).
   */
  validate?(context: EdgeBufferContext): readonly ConfigIssue[]
  /**
   * The directories the buffer will write files in, for a buffer that keeps files. `build()`
   * refuses a buffer that would write in a directory another sink's buffer writes in (sinks `a`
   * and `a/dead-letter` under one `dataDir`: the second is the first one's dead-letter queue),
   * naming the sink and the field; two writers in one directory take each other's files for
   * their own. None for a buffer whose options `validate` refuses.
   */
  directories?(context: EdgeBufferContext): readonly EdgeBufferDirectory[]
  /**
   * Opens the buffer when the topology starts, a new one on each call. If it throws, `start()`
   * rejects with a `TopologyError` (`BUFFER_OPEN_FAILED`) naming the component; so it does if it
   * returns, for a second sink, the buffer it opened for another (naming both).
   */
  open(context: EdgeBufferContext): Promise<EdgeBuffer>
}
