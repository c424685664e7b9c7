/**
 * The life of a disk buffer as one state and one pure transition function: `DiskBuffer` changes
 * its state only through {@link transition}, so what each call may do in each state is read here.
 * The state carries what the buffer works with: its live parts (writer, cursor, records in
 * flight, checkpoints) while open or draining, and only what remains readable of them (counters,
 * the segment list) once closed or crashed, so nothing reaches a writer or a cursor without
 * first finding the buffer live.
 *
 * Invariant: `closed` and `crashed` are final (no event leaves them); only `open` takes appends;
 * `draining` hands out what is left and then ends reads; `crashed` (a simulated crash, tests only)
 * touches no file again. The live parts are the same object for the whole life of the buffer.
 *
 * @module
 */

/**
 * Where a buffer is in its life. `Live` is what an open buffer works with; `Remains` is the part
 * of it still readable once the buffer stopped (a live buffer answers it too).
 */
export type DiskBufferState<Live extends Remains, Remains = Live> =
  /** Appends and reads. */
  | { readonly kind: 'open'; readonly live: Live }
  /** `endWrites()` was called: no appends; reads end once every record was read and settled. */
  | { readonly kind: 'draining'; readonly live: Live }
  /** `close()` was called: no appends, reads end at once, the files are (being) closed. */
  | { readonly kind: 'closed'; readonly remains: Remains }
  /** Abandoned by a simulated crash (tests only): nothing is written again. */
  | { readonly kind: 'crashed'; readonly remains: Remains }

/** The name of a state. */
export type DiskBufferKind = DiskBufferState<unknown>['kind']

/** What moves a buffer from one state to the next. */
export type DiskBufferEvent = 'endWrites' | 'close' | 'abandon'

/** The state of a buffer just opened, working with `live`. */
export const opened = <Live extends Remains, Remains>(live: Live): DiskBufferState<Live, Remains> => ({
  kind: 'open',
  live,
})

/** The state after `event` in `state`; the same object when the event changes nothing. */
export const transition = <Live extends Remains, Remains>(
  state: DiskBufferState<Live, Remains>,
  event: DiskBufferEvent,
): DiskBufferState<Live, Remains> => {
  switch (event) {
    case 'endWrites':
      return state.kind === 'open' ? { kind: 'draining', live: state.live } : state
    case 'close':
      return state.kind === 'open' || state.kind === 'draining'
        ? { kind: 'closed', remains: state.live }
        : state
    case 'abandon':
      // Even a closed buffer may be abandoned: the crash test kills whatever is left.
      switch (state.kind) {
        case 'crashed':
          return state
        case 'closed':
          return { kind: 'crashed', remains: state.remains }
        default:
          return { kind: 'crashed', remains: state.live }
      }
  }
}

/** The live parts of an open or draining buffer; `undefined` once it stopped (or for no state). */
export const liveOf = <Live extends Remains, Remains>(
  state: DiskBufferState<Live, Remains> | undefined,
): Live | undefined => (state?.kind === 'open' || state?.kind === 'draining' ? state.live : undefined)

/** What remains readable of a buffer in any state. */
export const remainsOf = <Live extends Remains, Remains>(state: DiskBufferState<Live, Remains>): Remains =>
  state.kind === 'open' || state.kind === 'draining' ? state.live : state.remains
