/**
 * Fairness with the event loop: a busy source lets the loop turn every 10 to 20 ms.
 *
 * A pipeline moves batches in microtasks: a send that finds room downstream resolves at once, and
 * the transforms and sinks that take the batch run in microtasks too. The event loop runs no timer,
 * no I/O callback and no other task until the microtask queue is empty. So a source that does no
 * I/O of its own (a generator, a source replaying data it holds in memory) would keep the whole
 * process in one task for as long as it has data: no `stop()` from a timer, no ack timeout, no
 * sink's completed write could run, and an endless source would never let anything else run.
 *
 * Invariant: while sends keep coming in one task, the loop turns at least once per two slices
 * ({@link SLICE_MS} each; one slice after the runtime armed its probe, and a probe is armed at
 * most a slice after the last one), or per {@link SENDS_PER_PROBE} sends, whichever comes first
 * (the count is for a clock that does not move: fake timers in tests), as read by the sends'
 * shared clock (`sendClock.ts`: a reading serves at most 16 sends of one burst, so the probe may
 * see a slice end up to 15 sends late). A send made once the armed
 * probe is due, before the loop turned, is accepted as usual, but the promise its source awaits
 * resolves only after the loop turned (in `setImmediate`, after pending I/O callbacks and due
 * timers). The batch itself is queued at once, so back pressure and order are unchanged.
 *
 * The state is the process's: every topology's sources share one probe. An I/O-driven source
 * (HTTP, a broker) turns the loop by itself and is held only when a slice passed with no turn:
 * after long synchronous work of its own between sends, or while another source of the process
 * keeps the loop busy.
 *
 * Cost: a comparison and a count per send, on the clock reading the send stamps its batch with, and one
 * `setImmediate` per slice while sends keep coming.
 */
import { setImmediate } from 'node:timers'

/** How long, in ms, after arming a probe a send waits for it if it has not run. */
export const SLICE_MS = 10
/** Sends after arming a probe at which a send waits for it, whatever the clock says. */
export const SENDS_PER_PROBE = 16_384

/**
 * The probe: armed (a `setImmediate` that has not run) or not. `setImmediate` is taken from
 * `node:timers`, which fake-timer libraries leave alone (they replace the global), so a probe
 * always runs at the loop's next turn.
 */
type Probe =
  | { readonly state: 'idle'; readonly armedAt: number; sends: number }
  | {
      readonly state: 'armed'
      readonly armedAt: number
      sends: number
      /** Settled when the probe runs; made only when some send waits for it. */
      turned: Promise<void> | undefined
      wake: (() => void) | undefined
    }

/** `sends`: sends since the probe was last armed. */
let probe: Probe = { state: 'idle', armedAt: Number.NEGATIVE_INFINITY, sends: 0 }

const onTurn = (): void => {
  if (probe.state !== 'armed') return
  const { wake, armedAt, sends } = probe
  probe = { state: 'idle', armedAt, sends }
  wake?.()
}

/**
 * The runtime is about to accept a send at `now` (a `Date.now()` just read): `undefined` when the
 * source may go on at once, or a promise settled once the event loop has turned (see the module
 * header). A clock that stepped back counts as a slice passed.
 */
export function awaitLoopTurn(now: number): Promise<void> | undefined {
  const since = now - probe.armedAt
  if (since < SLICE_MS && since >= 0 && ++probe.sends < SENDS_PER_PROBE) return undefined
  if (probe.state === 'idle') {
    setImmediate(onTurn)
    probe = { state: 'armed', armedAt: now, sends: 0, turned: undefined, wake: undefined }
    return undefined
  }
  if (probe.turned === undefined) {
    const armed = probe
    armed.turned = new Promise<void>((resolve) => {
      armed.wake = resolve
    })
  }
  return probe.turned
}
