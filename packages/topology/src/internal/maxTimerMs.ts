/**
 * The longest delay a Node.js timer keeps: 2^31 - 1 ms, about 24.8 days. `setTimeout` and
 * `setInterval` fire a longer delay (or `Infinity`, or `NaN`) after 1 ms instead, with only a
 * warning, so every delay the runtime arms is checked against it first, and the packages that
 * arm timers of their own (connectors, buffers) bound their options by it.
 */
export const MAX_TIMER_MS = 2_147_483_647
