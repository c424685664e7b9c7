/**
 * The subject option of the publishing sinks.
 *
 * Invariant: a subject no publish can ever reach is refused at build, naming the field, instead of
 * failing (or losing) each event at write time for ever: one with white space (the client throws
 * `InvalidSubjectError`), and one with an empty token (a leading or trailing `.`, or `..`), which
 * the server drops without a word (NATS 2.9: no subscriber gets it, not even one on `>`, and a
 * JetStream publish gets no answer, though the stream lookup at start matches such a subject).
 *
 * @module
 */
import { z } from 'zod'

/** A subject to publish to: not empty, no white space (the client's own check), no empty token. */
export const publishSubject = () =>
  z
    .string()
    .min(1)
    .refine((subject) => !/[ \n\r\t]/.test(subject), 'cannot contain white space')
    .refine(
      (subject) => !subject.split('.').includes(''),
      "cannot have an empty token ('..', or a leading or trailing '.')",
    )
