/**
 * Contiguous offsets for sources that read an ordered log (a file, a partition, a session): what
 * may be committed upstream is the last record below which every record is finished, whatever
 * order their outcomes arrive in.
 *
 * Invariant: records are tracked in read order and each gets a ticket; a record is *finished*
 * once resolved `delivered` or `rejected`; an `errored` record stays unfinished until it is
 * resolved again (after a retry). {@link OffsetTracker.committable} is the key of the last record
 * of the longest finished prefix, and it only moves forward. Rejected records are finished (the
 * checkpoint moves past them) and are handed out once by {@link OffsetTracker.takeRejected}, so
 * the source can dead-letter them before it commits.
 *
 * Cost: O(1) amortised per record: the records live in an array read from a moving head, which is
 * compacted once the finished prefix is at least half of it; a state byte per record.
 *
 * @module
 */
import type { DeliveryStatus } from './EventStatus.js'
import { shown } from './internal/shown.js'
import { OffsetTrackerError } from './OffsetTrackerError.js'

/** Options of an {@link OffsetTracker}. */
export interface OffsetTrackerOptions<K> {
  /** Named in errors (say, the file or partition the tracker follows). */
  readonly name?: string
  /**
   * What {@link OffsetTracker.committable} returns before any record is finished (for example the
   * offset a checkpoint restored); `undefined` by default.
   */
  readonly initial?: K
}

/** Options of {@link OffsetTracker.capped}. */
export interface CappedOffsetTrackerOptions<K> extends OffsetTrackerOptions<K> {
  /** The most weight (records, by default one each) that may be unfinished at once; at least 1. */
  readonly maxPending: number
}

const PENDING = 0
const ERRORED = 1
const FINISHED = 2

/** How many finished records at the head are worth a compaction (below this, keep them). */
const COMPACT_AT = 1024

/**
 * Tracks records of an ordered source and says how far it may commit.
 *
 * @example
 * ```ts
 * const tracker = new OffsetTracker<number>()
 * const a = tracker.track(100) // a line ending at byte 100
 * const b = tracker.track(180)
 * tracker.resolve(b, 'delivered')
 * tracker.committable() // undefined: the first line is not finished
 * tracker.resolve(a, 'delivered')
 * tracker.committable() // 180
 * ```
 */
export class OffsetTracker<K> {
  readonly #name: string
  #keys: (K | undefined)[] = []
  /** Weights other than 1, by ticket; most records weigh 1 and cost nothing here. */
  #weights: Map<number, number> | undefined = undefined
  #states = new Uint8Array(64)
  /** Index of the oldest unfinished record (or `#keys.length` when none is). */
  #head = 0
  /** The ticket of index 0. */
  #base = 0
  #committed: K | undefined
  #pendingCount = 0
  #pendingWeight = 0
  #rejected: K[] = []

  constructor(options?: OffsetTrackerOptions<K>) {
    // `null` (untyped code) is no options, as `undefined` is.
    this.#name = options?.name ?? 'offset tracker'
    this.#committed = options?.initial
  }

  /**
   * A tracker whose `track` waits while admitting the record would put more than `maxPending`
   * weight in flight, and always admits when nothing (or only weightless records) is in flight,
   * so a record heavier than the cap still goes through, alone (what is in flight is counted for
   * that, whatever the cap). A record fits when the weights are within a tolerance of
   * `maxPending`·1e-9, far above the rounding of fractional weights summed in doubles. See
   * {@link CappedOffsetTracker}. Options that are no object (from untyped code) throw an
   * {@link OffsetTrackerError} `INVALID_OPTION`, as a bad `maxPending` does.
   */
  static capped<K>(options: CappedOffsetTrackerOptions<K>): CappedOffsetTracker<K> {
    return new CappedOffsetTracker(options)
  }

  /**
   * Tracks the next record in read order; `key` is what {@link committable} returns once this
   * record and all before it are finished (the offset after the record, for a byte stream).
   * `weight` counts towards {@link pendingWeight} (default 1); a weight that is not a finite
   * number of at least 0 (from untyped code) throws an {@link OffsetTrackerError} `INVALID_WEIGHT`
   * and tracks nothing. Returns the record's ticket.
   */
  track(key: K, weight = 1): number {
    // Only an unusual weight is checked: a NaN would make `pendingWeight` NaN for good, and a
    // capped tracker would then never admit another record.
    if (weight !== 1) checkWeight(this.#name, weight)
    const index = this.#keys.length
    this.#keys.push(key)
    if (index >= this.#states.length) {
      const grown = new Uint8Array(this.#states.length * 2)
      grown.set(this.#states)
      this.#states = grown
    }
    this.#states[index] = PENDING
    this.#pendingCount++
    this.#pendingWeight += weight
    const ticket = this.#base + index
    if (weight !== 1) {
      if (this.#weights === undefined) this.#weights = new Map()
      this.#weights.set(ticket, weight)
    }
    return ticket
  }

  /**
   * Records the outcome of the record with `ticket`. `delivered` and `rejected` finish it (a
   * rejected key is queued for {@link takeRejected}); `errored` leaves it unfinished, to be
   * resolved again once retried. Resolving a finished record, or a ticket never handed out, throws
   * an {@link OffsetTrackerError}; so does a status that is none of the three (from untyped code),
   * with code `INVALID_STATUS`, and the record stays as it was.
   */
  resolve(ticket: number, status: DeliveryStatus): void {
    const index = ticket - this.#base
    if (!Number.isInteger(ticket) || index >= this.#keys.length || ticket < 0) {
      throw new OffsetTrackerError('UNKNOWN_TICKET', `${this.#name}: ticket ${ticket} was never handed out`)
    }
    if (index < this.#head || this.#states[index] === FINISHED) {
      throw new OffsetTrackerError(
        'ALREADY_FINISHED',
        `${this.#name}: the record of ticket ${ticket} is finished already`,
      )
    }
    switch (status) {
      case 'errored':
        this.#states[index] = ERRORED
        return
      case 'rejected':
        this.#rejected.push(this.#keys[index] as K)
        break
      case 'delivered':
        break
      default:
        // Finishing the record would let the checkpoint pass a record nobody delivered.
        throw new OffsetTrackerError(
          'INVALID_STATUS',
          `${this.#name}: ticket ${ticket} resolved with status ${shown(status)}: expected 'delivered', 'errored' or 'rejected'`,
        )
    }
    this.#states[index] = FINISHED
    this.#pendingCount--
    const weights = this.#weights
    if (weights === undefined || !weights.has(ticket)) {
      this.#pendingWeight--
    } else {
      this.#pendingWeight -= weights.get(ticket)!
      weights.delete(ticket)
    }
    // Fractional weights do not sum back to 0 (0.1 + 0.2 - 0.1 - 0.2 is 2.8e-17): nothing in
    // flight weighs 0, or a capped tracker would never admit a record heavier than its cap.
    if (this.#pendingCount === 0) this.#pendingWeight = 0
    if (index === this.#head) this.#advance()
  }

  /** The key of the last record of the longest finished prefix; `initial` until there is one. */
  committable(): K | undefined {
    return this.#committed
  }

  /** Records tracked and not finished (errored ones included). */
  get pending(): number {
    return this.#pendingCount
  }

  /**
   * The summed weight of the records not finished: exact for whole weights (up to 2^53), summed in
   * doubles for fractional ones, so it may read a rounding off their exact sum while records are
   * in flight (0 once none is). A capped tracker judges it within a tolerance of `maxPending`·1e-9.
   */
  get pendingWeight(): number {
    return this.#pendingWeight
  }

  /** Records resolved `errored` and not resolved since. */
  get errored(): number {
    let n = 0
    for (let i = this.#head; i < this.#keys.length; i++) if (this.#states[i] === ERRORED) n++
    return n
  }

  /** The keys of the records rejected since the last call, in the order they were rejected. */
  takeRejected(): K[] {
    const taken = this.#rejected
    // Never the tracker's own list: a caller that pushed into an empty answer would have its
    // keys handed back as rejected by the next call.
    if (taken.length === 0) return []
    this.#rejected = []
    return taken
  }

  #advance(): void {
    const keys = this.#keys
    const states = this.#states
    let head = this.#head
    while (head < keys.length && states[head] === FINISHED) head++
    this.#committed = keys[head - 1] as K
    // Forget the finished prefix once it is worth it: each record is copied at most once per
    // halving, which keeps the cost per record constant.
    if (head >= COMPACT_AT && head * 2 >= keys.length) {
      this.#keys = keys.slice(head)
      states.copyWithin(0, head, keys.length)
      this.#base += head
      head = 0
    } else {
      for (let i = this.#head; i < head; i++) keys[i] = undefined
    }
    this.#head = head
  }
}

/**
 * An {@link OffsetTracker} that bounds what is in flight: `track` resolves once the record is
 * admitted. Admission is first come, first served.
 *
 * @example
 * ```ts
 * const tracker = OffsetTracker.capped<number>({ maxPending: 1000 })
 * const ticket = await tracker.track(offset) // waits while 1000 records are unfinished
 * ```
 */
export class CappedOffsetTracker<K> {
  readonly #inner: OffsetTracker<K>
  readonly #max: number
  readonly #name: string
  readonly #waiting: { key: K; weight: number; admit: (ticket: number) => void; fail: (e: Error) => void }[] =
    []
  /**
   * The tickets of weightless records (weight 0) in flight: all in flight are weightless when the
   * inner tracker's `pending` is its size. Counted, not read off the summed weight, which a
   * tolerance must judge (and at a large cap, whole weights in flight read as none).
   */
  readonly #weightless = new Set<number>()
  #closed = false

  constructor(options: CappedOffsetTrackerOptions<K>) {
    if (typeof options !== 'object' || options === null) {
      throw new OffsetTrackerError(
        'INVALID_OPTION',
        `offset tracker: the options must be an object with maxPending, got ${shown(options)}`,
      )
    }
    this.#name = options.name ?? 'offset tracker'
    if (!Number.isInteger(options.maxPending) || options.maxPending < 1) {
      throw new OffsetTrackerError(
        'INVALID_OPTION',
        `${this.#name}: maxPending must be an integer of at least 1, got ${shown(options.maxPending)}`,
      )
    }
    this.#inner = new OffsetTracker(options)
    this.#max = options.maxPending
  }

  /**
   * Tracks the next record once admitting it keeps the weight in flight within `maxPending`, or
   * at once when nothing is in flight; resolves with its ticket. Records are admitted in the
   * order `track` was called. After {@link close} it rejects with an `OffsetTrackerError`, and
   * with one coded `INVALID_WEIGHT` for a weight that is not a finite number of at least 0.
   */
  track(key: K, weight = 1): Promise<number> {
    if (this.#closed) {
      return Promise.reject(new OffsetTrackerError('CLOSED', `${this.#name}: the tracker is closed`))
    }
    // Checked before queueing: the inner tracker would throw only when admitting it, inside the
    // `resolve` of another record.
    if (weight !== 1) {
      try {
        checkWeight(this.#name, weight)
      } catch (error) {
        return Promise.reject(error)
      }
    }
    if (this.#waiting.length === 0 && this.#admits(weight)) {
      return Promise.resolve(this.#track(key, weight))
    }
    return new Promise<number>((admit, fail) => {
      this.#waiting.push({ key, weight, admit, fail })
    })
  }

  /** As {@link OffsetTracker.resolve}; a finished record may admit waiting ones. */
  resolve(ticket: number, status: DeliveryStatus): void {
    this.#inner.resolve(ticket, status)
    if (status !== 'errored' && this.#weightless.size > 0) this.#weightless.delete(ticket)
    const waiting = this.#waiting
    let admitted = 0
    while (admitted < waiting.length && this.#admits(waiting[admitted]!.weight)) {
      const next = waiting[admitted++]!
      next.admit(this.#track(next.key, next.weight))
    }
    if (admitted > 0) waiting.splice(0, admitted)
  }

  /** See {@link OffsetTracker.committable}. */
  committable(): K | undefined {
    return this.#inner.committable()
  }

  /** See {@link OffsetTracker.pending}. */
  get pending(): number {
    return this.#inner.pending
  }

  /** Calls to `track` still waiting for room. */
  get waiting(): number {
    return this.#waiting.length
  }

  /** See {@link OffsetTracker.takeRejected}. */
  takeRejected(): K[] {
    return this.#inner.takeRejected()
  }

  /** Rejects every waiting `track` (and later ones) with an `OffsetTrackerError` `CLOSED`: the source is stopping. */
  close(): void {
    this.#closed = true
    const waiting = this.#waiting.splice(0)
    for (const w of waiting) w.fail(new OffsetTrackerError('CLOSED', `${this.#name}: the tracker is closed`))
  }

  #track(key: K, weight: number): number {
    const ticket = this.#inner.track(key, weight)
    if (weight === 0) this.#weightless.add(ticket)
    return ticket
  }

  #admits(weight: number): boolean {
    // Nothing that weighs is in flight: admitted whatever it weighs (alone). Counted, as summed
    // fractional weights may not read 0 when they are gone (0.1 + 0.2 - 0.1 - 0.2 is 2.8e-17).
    if (this.#inner.pending === this.#weightless.size) return true
    // Fractional weights are summed in doubles: what is in flight may read a little off its exact
    // sum (0.2 + 0.6 + 0.4 - 0.2 - 0.6 is 0.40000000000000024). Judged within a tolerance far
    // above that rounding and far below any weight that matters, a record that fills the cap
    // exactly is admitted.
    return this.#inner.pendingWeight + weight <= this.#max + this.#max * 1e-9
  }
}

function checkWeight(name: string, weight: number): void {
  if (typeof weight !== 'number' || !Number.isFinite(weight) || weight < 0) {
    throw new OffsetTrackerError(
      'INVALID_WEIGHT',
      `${name}: weight must be a finite number of at least 0, got ${shown(weight)}`,
    )
  }
}
