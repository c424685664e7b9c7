/**
 * The life of a disk buffer as one state and one pure transition function: `DiskBuffer` changes
 * its state only through {@link transition}, so what each call may do in each state is read here.
 *
 * Invariant: `closed` and `crashed` are final (no event leaves them); only `open` takes appends;
 * `draining` hands out what is left and then ends reads; `crashed` (a simulated crash, tests only)
 * touches no file again.
 *
 * @module
 */

/** Where a buffer is in its life. */
export type DiskBufferState =
  /** Appends and reads. */
  | { readonly kind: 'open' }
  /** `endWrites()` was called: no appends; reads end once every record was read and settled. */
  | { readonly kind: 'draining' }
  /** `close()` was called: no appends, reads end at once, the files are (being) closed. */
  | { readonly kind: 'closed' }
  /** Abandoned by a simulated crash (tests only): nothing is written again. */
  | { readonly kind: 'crashed' }

/** What moves a buffer from one state to the next. */
export type DiskBufferEvent = 'endWrites' | 'close' | 'abandon'

const OPEN: DiskBufferState = { kind: 'open' }
const DRAINING: DiskBufferState = { kind: 'draining' }
const CLOSED: DiskBufferState = { kind: 'closed' }
const CRASHED: DiskBufferState = { kind: 'crashed' }

/** The state of a buffer just opened. */
export const initialState: DiskBufferState = OPEN

/** The state after `event` in `state`; the same object when the event changes nothing. */
export const transition = (state: DiskBufferState, event: DiskBufferEvent): DiskBufferState => {
  switch (event) {
    case 'endWrites':
      return state.kind === 'open' ? DRAINING : state
    case 'close':
      return state.kind === 'open' || state.kind === 'draining' ? CLOSED : state
    case 'abandon':
      // Even a closed buffer may be abandoned: the crash test kills whatever is left.
      return state.kind === 'crashed' ? state : CRASHED
  }
}

/** Whether the buffer is stopped for good (closed or crashed): reads end, no checkpoint is scheduled. */
export const isStopped = (state: DiskBufferState): boolean =>
  state.kind === 'closed' || state.kind === 'crashed'
