/**
 * The longest delay a Node.js timer keeps: 2^31 - 1 ms, about 24.8 days. `setTimeout` fires a
 * longer delay after 1 ms instead, with only a warning (again and again, for a timer re-armed
 * until something is due), so every delay the buffer arms is kept under it.
 *
 * @module
 */
export const MAX_TIMER_MS = 2_147_483_647
