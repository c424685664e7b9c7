/**
 * The clock of sends: one `Date.now()` reading shared by the sends of one burst.
 *
 * Every send stamps its batch with an ingest timestamp (and, with acknowledgements, opens its
 * notifier at that time), and the loop-turn probe reads the same time. `Date.now()` costs about
 * 50 ns on the machines we measure, a fifth of what a whole batch of one event costs the runtime
 * without acknowledgements. A source that has room downstream sends back to back, each send in a
 * microtask of the same burst (one run of the microtask queue), where the clock moves by
 * microseconds: the sends of a burst share one reading, up to a bound.
 *
 * Invariant: a reading serves at most {@link SENDS_PER_READING} sends of fewer than
 * {@link EVENTS_PER_READING} events in all (a send of more reads the clock for itself alone), all
 * within the burst in which it was taken: each reading schedules its own forgetting in
 * `process.nextTick`, which Node runs before any timer or I/O callback (once the microtask queue
 * has drained when the reading was taken in a microtask, as a source's sends after the first
 * are; before that task's microtasks when it was taken in the task's own code, which only makes
 * the burst shorter). So an ingest timestamp is never later than its send; it lags the send by at
 * most the time the 15 sends before it in the same burst took, with whatever the source did
 * between them without letting the microtask queue drain. A source that waits for I/O between
 * sends (an HTTP request, a broker's message) reads the clock for each.
 *
 * `nextTick` is bound when this module loads (an ESM import of `node:process`), so a fake-timer
 * library installed later cannot take it over: a test that moves a fake clock between two sends
 * of one burst sees the first reading for both. Were a forgetting lost all the same, the next
 * reading schedules its own: no reading serves more than its 16 sends.
 *
 * @module
 */
import { nextTick } from 'node:process'

/** Sends that may share one reading. */
export const SENDS_PER_READING = 16
/**
 * Events after which the next send reads the clock again: a send of this many events costs the
 * runtime tens of µs, next to which the reading's 50 ns do not count.
 */
export const EVENTS_PER_READING = 256

let held = false
let reading = 0
let sends = 0
let events = 0

const forget = (): void => {
  held = false
}

/** The time (ms since 1970) for a send of `size` events: a reading shared as the module header says. */
export function sendClockNow(size: number): number {
  if (held) {
    sends++
    events += size
    if (sends < SENDS_PER_READING && events < EVENTS_PER_READING) return reading
  }
  // Each reading is forgotten in a tick of its own: an earlier tick that never ran (a fake
  // `nextTick` dropped it) cannot keep this one for longer than its sends.
  held = true
  nextTick(forget)
  sends = 0
  events = size
  reading = Date.now()
  return reading
}
