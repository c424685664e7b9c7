/**
 * @module @ackline/sources
 */
export {}
