/**
 * The subject option of the publishing sinks.
 *
 * Invariant: a subject the client refuses on every publish (white space: `InvalidSubjectError`) is
 * refused at build, naming the field, instead of failing each event at write time for ever.
 *
 * @module
 */
import { z } from 'zod'

/** A subject to publish to: not empty, no white space (the client's own check). */
export const publishSubject = () =>
  z
    .string()
    .min(1)
    .refine((subject) => !/[ \n\r\t]/.test(subject), 'cannot contain white space')
