/**
 * `file`: a sink that appends events to a file as NDJSON (one JSON object per line).
 *
 * Invariant: a write resolves (the events count as delivered) only after its lines were written
 * and the file fsynced, so an acknowledged event survives a crash of the machine. A failed open,
 * write or fsync throws a `RetryableError` (the runtime retries, then settles the events
 * `errored`), and the next write reopens the file. Writes never interleave: each array's lines
 * are appended as one contiguous block.
 *
 * @module
 */
import { statSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import type { EventArray } from '@ackline/core'
import {
  ConfigIssue,
  defineOptions,
  type OptionsOf,
  RetryableError,
  type Sink,
  type SinkResult,
} from '@ackline/topology'
import { z } from 'zod'

/** Options of {@link file}: its schema (`validate`, `jsonSchema`, …). */
export const FileSinkOptions = defineOptions({
  path: z
    .string()
    .min(1)
    .refine((path) => !path.includes('\0'), 'a file path without a NUL character')
    .describe('The file to append to; created when missing. Its directory must exist.'),
})
/** Options of {@link file}. */
export type FileSinkOptions = OptionsOf<typeof FileSinkOptions>

/** The sink {@link file} returns. */
export interface FileSink extends Sink {
  readonly kind: 'file'
  /** The absolute path written to. */
  readonly path: string
  validate(): readonly ConfigIssue[]
  start(): Promise<void>
  write(events: EventArray): Promise<SinkResult>
  stop(): Promise<void>
}

const RESOLVED: Promise<unknown> = Promise.resolve()

class NdjsonFile implements FileSink {
  readonly kind = 'file'
  readonly path: string
  readonly #options: FileSinkOptions
  #handle: FileHandle | undefined = undefined
  /** The last write or stop: the next one starts after it, so blocks never interleave. */
  #tail: Promise<unknown> = RESOLVED

  constructor(options: FileSinkOptions) {
    this.#options = options
    this.path = typeof options.path === 'string' && options.path !== '' ? resolve(options.path) : ''
  }

  validate(): readonly ConfigIssue[] {
    const issues = FileSinkOptions.validate(this.#options)
    if (issues.length > 0) return issues
    // What the schema cannot know: the file system as it is when the topology is built.
    const path = this.#options.path
    const dirStat = statSync(dirname(this.path), { throwIfNoEntry: false })
    if (dirStat?.isDirectory() !== true) {
      return [ConfigIssue.of('path', 'a file path in an existing directory', path)]
    }
    if (statSync(this.path, { throwIfNoEntry: false })?.isDirectory() === true) {
      return [ConfigIssue.of('path', 'a file path, not a directory', path)]
    }
    return []
  }

  start(): Promise<void> {
    return this.#serial(async () => {
      await this.#open()
    })
  }

  write(events: EventArray): Promise<SinkResult> {
    if (events.length === 0) return Promise.resolve(undefined)
    let text = ''
    for (const event of events) text += JSON.stringify(event.fields) + '\n'
    return this.#serial(() => this.#append(text))
  }

  stop(): Promise<void> {
    return this.#serial(async () => {
      const handle = this.#handle
      this.#handle = undefined
      await handle?.close()
    })
  }

  #serial<T>(step: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(step)
    this.#tail = run.catch(() => undefined)
    return run
  }

  async #open(): Promise<FileHandle> {
    if (this.#handle !== undefined) return this.#handle
    try {
      this.#handle = await open(this.path, 'a')
      return this.#handle
    } catch (error) {
      throw this.#failure('cannot open', error)
    }
  }

  async #append(text: string): Promise<undefined> {
    const handle = await this.#open()
    try {
      await handle.appendFile(text, 'utf8')
      await handle.sync()
      return undefined
    } catch (error) {
      // Reopen on the next try: the handle may be what broke (a file moved, a disk remounted).
      this.#handle = undefined
      await handle.close().catch(() => undefined)
      throw this.#failure('cannot append to', error)
    }
  }

  #failure(action: string, cause: unknown): RetryableError {
    const reason = cause instanceof Error ? cause.message : String(cause)
    return new RetryableError('file', `${action} ${this.path}: ${reason}`, { cause })
  }
}

/**
 * Appends every event as one JSON line to `path`, fsyncing before each write counts as
 * delivered. Failures are retryable: a retry may append lines written by a failed attempt
 * again (at-least-once).
 *
 * @example
 * ```ts
 * builder.sink('archive', ['parse'], file({ path: './data/events.ndjson' }))
 * ```
 */
export function file(options: FileSinkOptions): FileSink {
  return new NdjsonFile(options)
}
