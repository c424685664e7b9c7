/**
 * @module @ackline/buffers
 */
export {}
