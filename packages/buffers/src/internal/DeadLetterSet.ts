/**
 * The dead letters of a buffer as its main queue sees them: how a rejected record is stored in
 * the dead-letter queue (its original sequence number and frame checksum before the payload), and
 * which records of the main queue were found there at open.
 *
 * Invariant: a record of the main queue is taken for dead-lettered only when both its sequence
 * number and its checksum match a dead letter, so a number reused after a loss never matches a
 * different record; each match is used once.
 *
 * @module
 */

/** A dead letter read back from the dead-letter queue. */
export interface DecodedDeadLetter {
  /** Its sequence number in the dead-letter queue. */
  readonly seq: number
  /** Its sequence number in the main queue when it was rejected. */
  readonly originalSeq: number
  /** The checksum of its frame in the main queue. */
  readonly crc: number
  readonly payload: Uint8Array
}

/** Bytes before the payload: the original sequence number (u64 LE as two u32) and the frame checksum (u32 LE). */
const HEADER = 12

/** Records of the main queue found in the dead-letter queue at open, by sequence number and checksum. */
export class DeadLetterSet {
  /** The name of the dead-letter queue's directory, under the main queue's. */
  static readonly DIR = 'dead-letter'

  /**
   * Bytes a dead letter adds to its record's payload. A queue with a dead-letter queue takes no
   * record that its dead letter would not fit a frame with (`Frame.MAX_PAYLOAD_BYTES`).
   */
  static readonly HEADER_BYTES = HEADER

  /** The dead-letter record of a main-queue record `seq` whose frame checksum is `crc`. */
  static encode(seq: number, crc: number, payload: Uint8Array): Buffer {
    const header = Buffer.allocUnsafe(HEADER)
    header.writeUInt32LE(seq >>> 0, 0)
    header.writeUInt32LE(Math.floor(seq / 0x1_0000_0000), 4)
    header.writeUInt32LE(crc, 8)
    return Buffer.concat([header, payload])
  }

  /** Reads a dead-letter record back; `undefined` for one too short to hold the header. */
  static decode(record: {
    readonly seq: number
    readonly payload: Uint8Array
  }): DecodedDeadLetter | undefined {
    const p = Buffer.from(record.payload.buffer, record.payload.byteOffset, record.payload.length)
    if (p.length < HEADER) return undefined
    return {
      seq: record.seq,
      originalSeq: p.readUInt32LE(0) + p.readUInt32LE(4) * 0x1_0000_0000,
      crc: p.readUInt32LE(8),
      payload: p.subarray(HEADER),
    }
  }

  /** Sequence number → frame checksum. */
  readonly #found = new Map<number, number>()

  /** Notes a dead letter found at open. */
  add(originalSeq: number, crc: number): void {
    this.#found.set(originalSeq, crc)
  }

  /**
   * Whether record `seq` with checksum `crc` was dead-lettered before a crash that came before
   * its acknowledgement was checkpointed; a match is forgotten once claimed.
   */
  claim(seq: number, crc: number): boolean {
    if (this.#found.get(seq) !== crc) return false
    this.#found.delete(seq)
    return true
  }
}
