/**
 * @module @ackline/transforms
 */
export {}
