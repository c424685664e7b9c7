/**
 * The on-disk framing of one record: a 20-byte header, then the payload.
 *
 * ```
 * offset 0  magic   u32 LE  0x4c4b4341 ("ACKL"), so a reader can find the next frame after damage
 * offset 4  crc     u32 LE  CRC-32C of everything after it: bytes 8 .. 20 + length
 * offset 8  length  u32 LE  payload bytes
 * offset 12 seq     u64 LE  the record's sequence number (< 2^53)
 * offset 20 payload
 * ```
 *
 * Invariant: a frame is valid only if its magic, length and checksum all agree and its sequence
 * number is below 2^53; the checksum covers the length and the sequence number, so a damaged
 * header is caught like a damaged payload.
 *
 * @module
 */
import { Crc32c } from './Crc32c.js'

const MAGIC = 0x4c4b4341
const HEADER = 20
const MAGIC_BYTES = Buffer.from([0x41, 0x43, 0x4b, 0x4c])
/** The high 32 bits of the largest sequence number, 2^53 − 1. */
const MAX_SEQ_HIGH = 0x1f_ffff

const u32 = (bytes: Buffer, pos: number, value: number): void => {
  bytes[pos] = value
  bytes[pos + 1] = value >>> 8
  bytes[pos + 2] = value >>> 16
  bytes[pos + 3] = value >>> 24
}

/** A record's payload: bytes, or a string stored as its UTF-8 encoding. */
export type Payload = Uint8Array | string

/** A payload's length in bytes (a string's UTF-8 encoding). */
function byteLength(payload: Payload): number {
  return typeof payload === 'string' ? Buffer.byteLength(payload, 'utf8') : payload.length
}

/** One encoded batch: the bytes, and where each record's frame ends in them. */
export interface EncodedBatch {
  readonly bytes: Buffer
  /** `ends[i]` is the offset just after record `i`'s frame. */
  readonly ends: readonly number[]
  /** The checksum of each frame, by record. */
  readonly crcs: readonly number[]
}

/** Encoding and checking of frames. */
export const Frame = {
  HEADER_BYTES: HEADER,
  MAGIC_BYTES,
  /** The largest payload the length field can hold. */
  MAX_PAYLOAD_BYTES: 0xffff_ffff,

  /** The bytes a payload of `length` bytes takes on disk. */
  size(length: number): number {
    return HEADER + length
  },

  /**
   * Frames `payloads` with sequence numbers `firstSeq`, `firstSeq + 1`, … into one buffer. A string
   * payload is written as its UTF-8 bytes straight into the frame (no buffer of its own first).
   * `lengths[i]`, when given, must be payload i's length in bytes (`Frame.byteLength`).
   */
  encode(
    payloads: readonly Payload[],
    firstSeq: number,
    lengths: readonly number[] = payloads.map(byteLength),
  ): EncodedBatch {
    let total = 0
    for (let i = 0; i < lengths.length; i++) total += HEADER + lengths[i]!
    const bytes = Buffer.allocUnsafe(total)
    const ends: number[] = new Array(payloads.length)
    const crcs: number[] = new Array(payloads.length)
    let pos = 0
    for (let i = 0; i < payloads.length; i++) {
      const payload = payloads[i]!
      const seq = firstSeq + i
      const length = lengths[i]!
      // Byte stores rather than writeUInt32LE: a quarter of the cost of framing a batch.
      u32(bytes, pos, MAGIC)
      u32(bytes, pos + 8, length)
      u32(bytes, pos + 12, seq >>> 0)
      u32(bytes, pos + 16, Math.floor(seq / 0x1_0000_0000))
      // What is copied must be what was counted: a frame never holds bytes nobody wrote (a byte
      // payload on a resizable buffer could shrink while its append waited for room).
      let copied = payload.length
      if (typeof payload === 'string') copied = bytes.write(payload, pos + HEADER, length, 'utf8')
      else if (copied === length) bytes.set(payload, pos + HEADER)
      if (copied !== length) {
        throw new RangeError(`record ${seq} was counted as ${length} bytes but is ${copied} (it changed)`)
      }
      const crc = Crc32c.of(bytes, pos + 8, pos + HEADER + length)
      u32(bytes, pos + 4, crc)
      crcs[i] = crc
      pos += HEADER + length
      ends[i] = pos
    }
    return { bytes, ends, crcs }
  },

  /** A payload's length in bytes (a string's UTF-8 encoding). */
  byteLength,

  /** Whether `bytes[pos]` starts with the magic number. */
  hasMagic(bytes: Buffer, pos: number): boolean {
    return bytes.readUInt32LE(pos) === MAGIC
  },

  /** The payload length in the header at `pos` (which must hold a whole header). */
  length(bytes: Buffer, pos: number): number {
    return bytes.readUInt32LE(pos + 8)
  },

  /** The sequence number in the header at `pos`. */
  seq(bytes: Buffer, pos: number): number {
    return bytes.readUInt32LE(pos + 12) + bytes.readUInt32LE(pos + 16) * 0x1_0000_0000
  },

  /** The stored checksum of the frame at `pos`. */
  crc(bytes: Buffer, pos: number): number {
    return bytes.readUInt32LE(pos + 4)
  },

  /**
   * Whether the whole frame at `pos` (header and payload in `bytes`) checks out: its checksum, and
   * a sequence number below 2^53 (past it, numbers cannot be told apart: another tool's frame).
   */
  verify(bytes: Buffer, pos: number): boolean {
    const length = bytes.readUInt32LE(pos + 8)
    if (bytes.readUInt32LE(pos + 16) > MAX_SEQ_HIGH) return false
    return Crc32c.of(bytes, pos + 8, pos + HEADER + length) === bytes.readUInt32LE(pos + 4)
  },
} as const
