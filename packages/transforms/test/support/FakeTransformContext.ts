/**
 * A `TransformContext` that records what a transform does, for unit tests that must not depend
 * on the runtime. It applies the transform's `dropStatus` on `drop`, as the runtime must.
 */
import { type EventArray, type JsonObject, LogEvent } from '@ackline/core'
import type { TransformContext } from '@ackline/topology'

export class FakeTransformContext implements TransformContext {
  readonly id: string
  /** `true` unless the test says otherwise: as in a topology whose sinks acknowledge. */
  readonly acknowledgements: boolean
  /** Every emitted handle with its port (`undefined` for the default output), in order. */
  readonly emitted: { readonly event: LogEvent; readonly port: string | undefined }[] = []
  /** Every dropped handle, in order. */
  readonly dropped: LogEvent[] = []
  readonly #dropStatus: 'delivered' | 'rejected' | undefined

  constructor(
    options: {
      readonly id?: string
      readonly dropStatus?: 'delivered' | 'rejected'
      readonly acknowledgements?: boolean
    } = {},
  ) {
    this.id = options.id ?? 'under_test'
    this.acknowledgements = options.acknowledgements ?? true
    this.#dropStatus = options.dropStatus
  }

  /** A context for `transform`, reading its `dropStatus` like the runtime does. */
  static for(transform: { readonly dropStatus?: 'delivered' | 'rejected' }): FakeTransformContext {
    return new FakeTransformContext(
      transform.dropStatus === undefined ? {} : { dropStatus: transform.dropStatus },
    )
  }

  emit(event: LogEvent, port?: string): void {
    if (event.isEnded) throw new Error('emitted an ended event')
    if (this.emitted.some((e) => e.event === event)) throw new Error('emitted the same handle twice')
    this.emitted.push({ event, port })
  }

  emitAll(events: EventArray, port?: string): void {
    for (const event of events) this.emit(event, port)
  }

  drop(event: LogEvent): void {
    this.dropped.push(event)
    event.end(this.#dropStatus === 'rejected' ? 'rejected' : undefined)
  }

  create(fields: JsonObject, inheritFrom: readonly LogEvent[] = []): LogEvent {
    const event = new LogEvent(fields)
    for (const parent of inheritFrom) event.merge(parent.clone())
    return event
  }

  /** The emitted handles on `port` (`undefined`: the default output). */
  on(port?: string): LogEvent[] {
    return this.emitted.filter((e) => e.port === port).map((e) => e.event)
  }

  /** The fields of what was emitted on `port`. */
  fieldsOn(port?: string): JsonObject[] {
    return this.on(port).map((e) => ({ ...e.fields }))
  }

  /** Plays the sinks: ends every emitted handle, with `status(event)` or `'delivered'`. */
  settle(status: (event: LogEvent) => 'delivered' | 'errored' | 'rejected' = () => 'delivered'): void {
    for (const { event } of this.emitted) if (!event.isEnded) event.end(status(event))
  }
}
