/**
 * @module @ackline/sinks
 */
export {}
