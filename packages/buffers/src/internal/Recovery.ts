/**
 * The recovery step of opening a buffer: reads what the directory holds (settings, ledger,
 * segments), repairs what a crash left (a leftover temporary ledger, a torn last write), and
 * works out where the queue stands.
 *
 * Invariants: only bytes no reader could deliver are removed (a torn tail of the last segment,
 * which only a crash mid-write leaves); a ledger acknowledging past the records on disk is refused
 * (`LEDGER_AHEAD`) before anything is deleted; the settings the files were written with win over
 * the options. Only the last segment is scanned, so recovery costs one segment's scan at most
 * (and the first frame and the tail of each segment before it, to leave alone a file whose records
 * do not fit its name, or whose name lies inside the records of the segment before it).
 *
 * @module
 */
import { DiskBufferError } from '../DiskBufferError.js'
import { BufferSettings } from './BufferSettings.js'
import type { Settings } from './DiskBufferSettings.js'
import { type FileLike, openExisting } from './FileSystem.js'
import { Frame } from './Frame.js'
import { Ledger } from './Ledger.js'
import { LockFile } from './LockFile.js'
import { SEGMENT_NAME, type Segment, segmentFirstSeq, segmentName, segmentWriteMode } from './Segment.js'
import { SegmentReader } from './SegmentReader.js'

/** Where a recovered queue stands. */
export interface Recovered {
  /** The settings to run with (the stored `segmentBytes` over the option's). */
  readonly settings: Settings
  /** The segment files, in order. */
  readonly segments: Segment[]
  /** The last segment, open for appending (its torn tail cut off). */
  readonly active: FileLike | undefined
  readonly nextSeq: number
  readonly ackedBelow: number
  /** Bytes of a torn write cut off the last segment. */
  readonly tornBytes: number
  /** Whether the ledger was read whole (otherwise it was rebuilt and must be written). */
  readonly ledgerOk: boolean
}

/**
 * The settings the files were written with win over the options (a smaller `segmentBytes`
 * would make longer records look torn); a buffer with no segment takes the options' values.
 * Stores them when they are missing, damaged or changed.
 */
async function storedSettings(s: Settings, hasSegments: boolean): Promise<Settings> {
  const { fs, path } = s
  const stored = await BufferSettings.read(fs, path)
  let settings = s
  if (stored.status === 'corrupt') {
    s.log(
      `disk buffer ${path}: ${BufferSettings.FILE} is damaged (${stored.reason}); using segmentBytes ${s.segmentBytes} from the options and storing it`,
    )
  } else if (stored.status === 'ok' && stored.settings.segmentBytes !== s.segmentBytes) {
    if (hasSegments) {
      s.log(
        `disk buffer ${path}: option segmentBytes ${s.segmentBytes} differs from the ${stored.settings.segmentBytes} the buffer's files were written with; using ${stored.settings.segmentBytes}. To change it, let the buffer drain (a buffer with no segment takes the new value) or give it a new path`,
      )
      settings = { ...s, segmentBytes: stored.settings.segmentBytes }
    }
  }
  if (stored.status !== 'ok' || stored.settings.segmentBytes !== settings.segmentBytes) {
    await BufferSettings.write(fs, path, { segmentBytes: settings.segmentBytes })
  }
  return settings
}

/** The sequence number of the first whole record of `seg`'s `file`, or `undefined` when it holds none. */
async function firstRecordSeq(s: Settings, seg: Segment, file: FileLike): Promise<number | undefined> {
  // A small first read: only the first frame is wanted (damage before it is read past).
  const reader = new SegmentReader(file, {
    start: 0,
    end: seg.size,
    maxPayload: Math.max(s.segmentBytes, seg.size),
    chunkBytes: 64 << 10,
    payloads: false,
  })
  for (;;) {
    const [item] = await reader.read(1)
    if (item === undefined) return undefined
    if (item.kind === 'record') return item.seq
  }
}

/** How much of a segment's end {@link lastRecordSeq} reads first. */
const TAIL_BYTES = 64 << 10

/** How much {@link lastFrameBefore} reads at a time, going back from the tail. */
const BACK_BYTES = 1 << 20

/** `length` bytes of `file` from `position` (fewer only at its end). */
async function readAt(file: FileLike, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(length)
  let filled = 0
  while (filled < length) {
    const got = await file.read(buf, filled, length - filled, position + filled)
    if (got === 0) break
    filled += got
  }
  return filled === length ? buf : buf.subarray(0, filled)
}

/**
 * The sequence number of the last frame of `seg`'s `file` that starts before `start` and ends at
 * the file's end, checked whole, or `undefined` when there is none: the record a tail from `start`
 * holding no whole frame lies in. It goes back from `start` a {@link BACK_BYTES} read at a time,
 * looking for the magic; a header that fits (its frame ends at the file's end) is read with its
 * payload, once, and checked. So a long last record costs about twice its length (once looking
 * for its header, once checking it), not the growing reads of the whole end of the file it cost
 * before (up to 17 times the record). A frame ending before the file's end is not taken: it can
 * only be one held in the payload of the long last record (whose own header lies further back),
 * or damage follows it, which reading the file from its start sorts out.
 */
async function lastFrameBefore(
  s: Settings,
  seg: Segment,
  file: FileLike,
  start: number,
): Promise<number | undefined> {
  const maxPayload = Math.max(s.segmentBytes, seg.size)
  const header = Frame.HEADER_BYTES
  for (let hi = start; hi > 0; ) {
    const lo = Math.max(0, hi - BACK_BYTES)
    // Past `hi` by a header less one byte: a header starting below `hi` is read whole.
    const bytes = await readAt(file, lo, Math.min(seg.size, hi + header - 1) - lo)
    for (let at = bytes.lastIndexOf(Frame.MAGIC_BYTES, hi - 1 - lo); at >= 0; ) {
      const pos = lo + at
      if (at + header <= bytes.length) {
        const length = Frame.length(bytes, at)
        const end = pos + header + length
        // Ending short of the file's end, it is a frame held in the long last record's payload
        // (taken for that record, it hid a file named inside the records), or damage follows it.
        if (length <= maxPayload && end === seg.size) {
          const frame = await readAt(file, pos, header + length)
          if (frame.length === header + length && Frame.verify(frame, 0)) return Frame.seq(frame, 0)
        }
      }
      at = at === 0 ? -1 : bytes.lastIndexOf(Frame.MAGIC_BYTES, at - 1)
    }
    hi = lo
  }
  return undefined
}

/** The last record's number as {@link lastRecordSeq} found it, and whether it read the file from its start to find it. */
interface LastRecord {
  readonly seq: number | undefined
  /** Read from the file's start, as a reader would: a frame inside a payload was never taken for a record. */
  readonly fromStart: boolean
}

/**
 * The sequence number of the last whole record of `seg`'s `file` (in file order), or `undefined`
 * when it holds none. It reads the file's last {@link TAIL_BYTES}, resynchronising on the framing
 * as reading does; when they hold no whole frame (a long last record, or damage), it goes back
 * for the frame they lie in ({@link lastFrameBefore}), and reads the file from its start only
 * when there is none (damage at the end). With `whole`, it reads the file from its start, as a
 * reader would (a frame inside a payload is never taken for one).
 */
async function lastRecordSeq(s: Settings, seg: Segment, file: FileLike, whole = false): Promise<LastRecord> {
  const start = whole ? 0 : Math.max(0, seg.size - TAIL_BYTES)
  const reader = new SegmentReader(file, {
    start,
    end: seg.size,
    maxPayload: Math.max(s.segmentBytes, seg.size),
    chunkBytes: Math.min(seg.size - start, 8 << 20),
    payloads: false,
  })
  let last: number | undefined
  for (;;) {
    const items = await reader.read(4096)
    if (items.length === 0) break
    for (const item of items) if (item.kind === 'record') last = item.seq
  }
  if (last !== undefined || start === 0) return { seq: last, fromStart: start === 0 }
  const before = await lastFrameBefore(s, seg, file, start)
  return before === undefined ? lastRecordSeq(s, seg, file, true) : { seq: before, fromStart: false }
}

/** The `code` of a file-system error (`EIO`, `ENOENT`…), or `undefined` for any other error (a programming error, which is thrown on). */
function fileErrorCode(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return error instanceof Error && typeof code === 'string' ? code : undefined
}

/**
 * The error refusing the open when `error` says `name` is a directory (`EISDIR`), named like a
 * segment: no segment can be read from it or written to it, and the raw error named no file.
 * `undefined` for any other error.
 */
function directoryError(s: Settings, name: string, error: unknown): DiskBufferError | undefined {
  if (fileErrorCode(error) !== 'EISDIR') return undefined
  return new DiskBufferError(
    'READ_FAILED',
    `${s.path}/${name} is a directory, named like a segment file, so the buffer was not opened (nothing was changed): move it out of the buffer's directory, or rename it, then open again`,
    s.path,
    undefined,
    { cause: error },
  )
}

/** A number read from a file (`null`: none there), or the code of the file-system error that kept it from being read. */
type ReadSeq = { readonly seq: number | null } | { readonly failed: string }

/** The ends of a segment holding no record. */
const NONE: SegmentEnds = { first: { seq: null }, last: { seq: null } }

/** What opening reads of a segment before the last: its first record, and its last. */
interface SegmentEnds {
  readonly first: ReadSeq
  readonly last: ReadSeq
}

/**
 * `seg`'s first and last record, read through one handle (one open a segment): the first frame,
 * then the tail; the file from its start when the tail's last record is not the one just below
 * `nextName` (the next file's number, the lowest a file judged against it may have: a segment
 * rolled as this buffer rolls them ends there), so that a frame held in the payload of a long last
 * record is not taken for a record; not when it stops short of `nextName` and the next file is
 * one the ledger lists (`rolled`: this buffer made it, past every record of this segment). A
 * file-system error (a bad sector, a file deleted since the listing) is kept as the answer of the read it stopped; any other error
 * is thrown, and a directory named like a segment refuses the open (an empty file is opened too,
 * and read a byte of: a directory's stat may give 0).
 */
async function segmentEnds(
  s: Settings,
  seg: Segment,
  nextName: number,
  rolled: boolean,
): Promise<SegmentEnds> {
  const attempt = async (read: () => Promise<number | undefined>): Promise<ReadSeq> => {
    try {
      return { seq: (await read()) ?? null }
    } catch (error) {
      const code = fileErrorCode(error)
      if (code === undefined) throw error
      const directory = directoryError(s, seg.name, error)
      if (directory !== undefined) throw directory
      return { failed: code }
    }
  }
  let file: FileLike
  try {
    file = await s.fs.open(`${s.path}/${seg.name}`, 'read')
  } catch (error) {
    const code = fileErrorCode(error)
    if (code === undefined) throw error
    const directory = directoryError(s, seg.name, error)
    if (directory !== undefined) throw directory
    return seg.size === 0 ? NONE : { first: { failed: code }, last: { failed: code } }
  }
  try {
    if (seg.size === 0) {
      // Nothing to read, but some file systems (btrfs) give an empty directory a size of 0: a
      // read tells it (EISDIR) from an empty file. Kept, it was met by a reader, or deleted.
      await attempt(async () => {
        await file.read(Buffer.alloc(1), 0, 1, 0)
        return undefined
      })
      return NONE
    }
    const first = await attempt(() => firstRecordSeq(s, seg, file))
    const last = await attempt(async () => {
      const tail = await lastRecordSeq(s, seg, file)
      // This buffer rolls a segment for the record after its last, so the next file is named one
      // past the tail's last record. Any other answer (a name the tail seems to reach, or one past
      // a gap) may come from frames held at the end of a long last record's payload, which the
      // tail cannot tell from records: read whole, as a reader would. A gap is rare (numbers a
      // failed write skipped, a segment started past damage, a file left alone), so opening a
      // buffer that rolled as usual reads no more than the tails. A next file the ledger lists was
      // rolled by this buffer after every record of this segment: a tail stopping short of it is a
      // gap, not a record hidden past it. Read whole, every segment a failed roll left ending so
      // was read whole on every open, the whole buffer after a spell of failed rolls.
      if (tail.fromStart || tail.seq === undefined || tail.seq === nextName - 1) return tail.seq
      if (rolled && tail.seq < nextName) return tail.seq
      return (await lastRecordSeq(s, seg, file, true)).seq
    })
    return { first, last }
  } finally {
    // Read only: a failed close loses nothing, and must not refuse the open.
    await file.close().catch(() => undefined)
  }
}

/**
 * Drops from `segments` (in name order) every file opening must leave alone:
 *
 * - one, but the last, whose first record does not fit its name: a segment of this buffer starts
 *   at or after the number it is named after and before the next segment's. (The last is judged
 *   by its scan, which reads its first frame anyway: below its name only.)
 * - one, the last too, named at or below the last record of the segment kept before it: this
 *   buffer names a segment after the record that rolled it, past every record before it.
 *
 * Such a file (copied in, renamed, restored from a backup) broke the order everything else relies
 * on: the segment before it was deleted once the prefix passed the foreign name, with records of
 * its own unread, and records numbered past the next segment's made the reader skip the rest as
 * missing while a drain waited for ever. It is left on disk, untouched, and logged; the segment
 * a file is named inside is marked as sheltering it (`Segment.shelters`), so that it is kept on
 * disk once acknowledged and the next open judges the file the same way. Each segment but the
 * last is opened once ({@link segmentEnds}): its first frame, and its tail for the last record
 * (the first frame alone says nothing of its end); one whose tail does not end just below the next
 * name (it seems to reach it, or stops short of it, the next file not one the ledger lists: a
 * failed roll's skipped numbers leave such a gap before a segment this buffer made, which, read
 * whole, cost that segment's whole read on every open) is read again from its start, so that a
 * frame held in the payload of a long last record is never taken for it. (Not caught: a last record
 * longer than the tail read whose payload ends with a whole frame numbered exactly one below the
 * next name hides a file of that name inside its records; only a payload that holds a buffer's own
 * frames can, and telling it apart would take reading every segment whole on every open.) A
 * file-system error
 * reading a first frame or a tail (a bad sector, a file deleted since the listing) leaves that
 * check undone: the file is kept, and the segment that could not be read is logged.
 * Returns the number past the names of the files left alone (0 when none is): numbering goes on
 * past it, so that no segment of this buffer is ever given the name of one (it would be appended
 * to).
 */
async function leaveForeignAlone(
  s: Settings,
  segments: Segment[],
  listed: ReadonlySet<number>,
): Promise<number> {
  const names = segments.map((seg) => seg.firstSeq)
  // The last one's first record is judged by the scan of it (Recovery.run), which reads it anyway,
  // and its end by nothing: only the segments before it are read here.
  const ends: SegmentEnds[] = []
  for (let i = 0; i + 1 < segments.length; i++)
    ends.push(await segmentEnds(s, segments[i]!, names[i + 1]!, listed.has(names[i + 1]!)))
  let past = 0
  /** The index, in `names`, of the segment kept last, if any. */
  let prev: number | undefined
  for (let i = 0, kept = 0; i < names.length; i++) {
    const seg = segments[kept]!
    const next = names[i + 1]
    const first = ends[i]?.first
    if (first !== undefined && 'failed' in first) {
      s.log(
        `disk buffer ${s.path}: the first frame of ${s.path}/${seg.name} could not be read (${first.failed}), so whether its records fit its name was not checked; kept`,
      )
    }
    const firstSeq = first !== undefined && 'seq' in first ? first.seq : null
    let why: string | undefined
    if (firstSeq !== null && (firstSeq < seg.firstSeq || firstSeq >= next!)) {
      why = `its first record is numbered ${firstSeq}, outside ${seg.firstSeq}..${next! - 1}`
    } else if (prev !== undefined) {
      const before = segments[kept - 1]!
      const last = ends[prev]!.last
      if ('failed' in last) {
        // A file-system error (a bad sector, a file deleted since the listing) makes this check
        // say nothing: the file is kept, as before the check existed, and a reader meets the
        // error, if any, when it reaches that segment. An open refused for it left the buffer
        // unopenable for a segment it might never read again (one all acknowledged).
        s.log(
          `disk buffer ${s.path}: the tail of ${s.path}/${before.name} could not be read (${last.failed}), so whether ${seg.name} is named inside its records was not checked; kept`,
        )
      } else if (last.seq !== null && last.seq >= seg.firstSeq) {
        why = `its name lies inside the records of ${before.name}, which run to ${last.seq}`
        before.shelters ??= seg.name
      }
    }
    if (why === undefined) {
      kept++
      prev = i
      continue
    }
    segments.splice(kept, 1)
    past = Math.max(past, seg.firstSeq + 1)
    s.log(`disk buffer ${s.path}: ${seg.name} is not a segment of this buffer (${why}); left alone`)
  }
  return past
}

/** The recovery step. */
export const Recovery = {
  /** Recovers the directory of `settings.path` (already locked); throws `LEDGER_AHEAD` as above. */
  async run(settings: Settings): Promise<Recovered> {
    let s = settings
    const { fs, path } = s
    const names = await fs.readdir(path)
    if (names.includes(Ledger.TEMP)) {
      // A crash between writing the new ledger and renaming it: the old one is the truth.
      s.log(`disk buffer ${path}: discarded ${Ledger.TEMP} left by a crash; using the previous ledger`)
      await fs.unlink(`${path}/${Ledger.TEMP}`)
    }
    if (names.includes(BufferSettings.TEMP)) {
      // A crash between writing new settings and renaming them: the old ones (or none) hold.
      s.log(
        `disk buffer ${path}: discarded ${BufferSettings.TEMP} left by a crash; using the previous settings`,
      )
      await fs.unlink(`${path}/${BufferSettings.TEMP}`)
    }
    for (const name of s.lock ? await LockFile.strayTemps(fs, path, names) : []) {
      s.log(`disk buffer ${path}: discarded ${name}, a temporary lock file its process, now gone, left`)
      await fs.unlink(`${path}/${name}`)
    }
    const ledger = await Ledger.read(fs, path)
    if (ledger.status === 'ok' && ledger.passedOver !== undefined) {
      s.log(
        `disk buffer ${path}: the last checkpoint in ${Ledger.FILE} is not whole (${ledger.passedOver}); using the one before it`,
      )
    }
    const segments: Segment[] = []
    for (const name of names.sort()) {
      if (!SEGMENT_NAME.test(name)) continue
      const firstSeq = segmentFirstSeq(name)
      if (firstSeq === undefined) {
        // Taken for a segment, its number would stop the sequence numbers growing (2^53 + 1 is 2^53).
        s.log(
          `disk buffer ${path}: ${name} is not a segment of this buffer (its number is past 2^53); left alone`,
        )
        continue
      }
      let size: number | undefined
      try {
        size = await fs.size(`${path}/${name}`)
      } catch (error) {
        // Refused, not passed over: without its size no record of it can be read, and a segment
        // passed over is read as records missing, counted acknowledged, and saved so by the next
        // checkpoint, never delivered once the file reads again. Passing over only one the ledger
        // counts acknowledged whole would leave the file after it unjudged (one this open would
        // leave alone, named inside its records, then taken in and deleted). Nothing is changed
        // yet: the next open, once the file reads, goes on as if this one never ran.
        const code = fileErrorCode(error)
        if (code === undefined) throw error
        throw new DiskBufferError(
          'READ_FAILED',
          `the size of segment ${path}/${name} could not be read (${code}), so the buffer was not opened: without it none of its records can be read, and passed over they would be counted acknowledged and never delivered. Nothing was changed. Once the file reads again (the disk, its permissions), open again; to give up its records, move it out of the directory`,
          path,
          undefined,
          { cause: error },
        )
      }
      // Deleted since the listing (ENOENT): gone, as if deleted before it. Listed with size 0, the
      // last one was made again, empty, by opening it to append.
      if (size === undefined) continue
      segments.push({ firstSeq, name, size, visible: size, sealed: false })
    }
    // The segments the ledger lists were rolled by this buffer: none is named inside the records
    // of one before it.
    let pastForeign = await leaveForeignAlone(
      s,
      segments,
      new Set(ledger.status === 'ok' ? ledger.ledger.segments : []),
    )
    if (ledger.status === 'ok') {
      for (const first of ledger.ledger.segments) {
        // One before the first segment left is reported with the records it took, below.
        const later = segments[0] !== undefined && first > segments[0].firstSeq
        if (first >= ledger.ledger.ackedBelow && later && !segments.some((seg) => seg.firstSeq === first)) {
          s.log(`disk buffer ${path}: segment ${segmentName(first)} listed in the ledger is missing`)
        }
      }
    }
    s = await storedSettings(s, segments.length > 0)
    // Only the last segment can hold a torn write: scan it to find its last whole frame.
    let tornBytes = 0
    let lastSeq = -1
    /** Where the last segment's whole frames end: a torn tail past it is cut below. */
    let validEnd = 0
    let active: FileLike | undefined
    let last = segments.at(-1)
    while (last !== undefined) {
      tornBytes = 0
      lastSeq = -1
      validEnd = 0
      let first: number | undefined
      try {
        active = await openExisting(fs, `${path}/${last.name}`, segmentWriteMode(s.sync))
      } catch (error) {
        if (fileErrorCode(error) !== 'ENOENT') throw directoryError(s, last.name, error) ?? error
        // Deleted since its size was read: gone, as if deleted before the listing. Opened with a
        // create, it was made again, empty, and its records were reported as a torn write cut off.
        active = undefined
        segments.pop()
        last = segments.at(-1)
        continue
      }
      // A file read or cut that fails leaves no handle open behind the error.
      try {
        const reader = new SegmentReader(active, {
          start: 0,
          end: last.size,
          // Bounded by the file, not the option: a record longer than today's segmentBytes is not torn.
          maxPayload: Math.max(s.segmentBytes, last.size),
          chunkBytes: 8 << 20,
          payloads: false,
        })
        for (;;) {
          const items = await reader.read(4096)
          if (items.length === 0) break
          for (const item of items) {
            if (item.kind === 'record') {
              first ??= item.seq
              lastSeq = Math.max(lastSeq, item.seq)
              validEnd = item.offset + item.size
            } else if (item.kind === 'torn') {
              tornBytes = item.bytes
            }
          }
        }
      } catch (error) {
        await active.close().catch(() => undefined)
        throw error
      }
      if (first === undefined || first >= last.firstSeq) break
      // Records numbered below its name: not a segment of this buffer, as one before the last
      // would be (leaveForeignAlone). Read and appended to, the records this buffer wrote into it
      // were left alone with it by the next open, once a segment followed it.
      await active.close()
      active = undefined
      segments.pop()
      pastForeign = Math.max(pastForeign, last.firstSeq + 1)
      s.log(
        `disk buffer ${path}: ${last.name} is not a segment of this buffer (its first record is numbered ${first}, below ${last.firstSeq}); left alone`,
      )
      last = segments.at(-1)
    }
    const known = ledger.status === 'ok' ? ledger.ledger : undefined
    // Every record below a checkpointed `ackedBelow` was fsynced before the checkpoint, so a
    // ledger acknowledging past the last record on disk describes other data: deleting by it
    // would drop records nobody acknowledged. (A damaged tail, cut below, may have held some.)
    const dataEnd = last === undefined ? undefined : Math.max(lastSeq + 1, last.firstSeq)
    if (
      known !== undefined &&
      dataEnd !== undefined &&
      tornBytes === 0 &&
      segments.some((seg) => seg.size > 0) &&
      known.ackedBelow > dataEnd
    ) {
      await active?.close()
      throw new DiskBufferError(
        'LEDGER_AHEAD',
        `${Ledger.FILE} says every record below ${known.ackedBelow} was acknowledged, but the records on disk end at record ${dataEnd - 1} (segments ${segments[0]!.name} .. ${last!.name}): the ledger does not belong to these segments (restored from another backup, or written by a tool?). Nothing was deleted. To deliver every record on disk again, rebuild the ledger with: ackline-buffer ${path} --repair`,
        path,
        'ackedBelow',
      )
    }
    const numbered = Math.max(lastSeq + 1, last?.firstSeq ?? 0, known?.nextSeq ?? 0, known?.ackedBelow ?? 0)
    // Past a file left alone above: no segment of this buffer may be given its name.
    const nextSeq = Math.max(numbered, pastForeign)
    if (nextSeq > Number.MAX_SAFE_INTEGER) {
      // Only a record numbered 2^53 − 1 brings it there (frames past it are damage): the next
      // record's number could be neither read back nor saved in the ledger.
      await active?.close()
      throw new DiskBufferError(
        'SEQUENCE_EXHAUSTED',
        `segment ${last!.name} holds a record numbered ${lastSeq}, the last sequence number (2^53 − 1): no number is left for the next record. No buffer counts that far: the segment came from elsewhere (copied, edited). Move it out of the directory, or give the buffer a new path`,
        path,
        'nextSeq',
      )
    }
    let fresh: FileLike | undefined
    if (dataEnd !== undefined && nextSeq > dataEnd) {
      // Numbers below nextSeq lie past the records left (a damaged tail, cut below, or records
      // gone missing): once they count acknowledged, a checkpoint saves a prefix past the last
      // record, which the next open would take for another buffer's ledger (LEDGER_AHEAD). An
      // empty segment named after nextSeq says where the records end, as a segment rolled there
      // would. Made before the tail is cut: an open that failed (or a crash) after the cut and
      // before the segment left neither, and the next open refused the ledger (LEDGER_AHEAD). The
      // other way round, the tail left is read as damage in a segment that is no longer the last.
      const name = segmentName(nextSeq)
      try {
        fresh = await fs.open(`${path}/${name}`, segmentWriteMode(s.sync))
        await fs.syncDir(path)
      } catch (error) {
        await fresh?.close().catch(() => undefined)
        await active?.close().catch(() => undefined)
        throw error
      }
      segments.push({ firstSeq: nextSeq, name, size: 0, visible: 0, sealed: false })
      s.log(
        `disk buffer ${path}: records ${dataEnd}..${nextSeq - 1} are past the end of the records on disk${nextSeq > numbered ? ' (numbering goes on past the file left alone)' : ''}; starting segment ${name}`,
      )
    }
    if (tornBytes > 0 && active !== undefined && last !== undefined) {
      s.log(
        `disk buffer ${path}: cut a torn write of ${tornBytes} bytes off segment ${last.name} at offset ${validEnd}`,
      )
      try {
        await active.truncate(validEnd)
        await active.datasync()
      } catch (error) {
        await fresh?.close().catch(() => undefined)
        await active.close().catch(() => undefined)
        throw error
      }
      last.size = validEnd
      last.visible = validEnd
    }
    if (fresh !== undefined) {
      await active?.close()
      active = fresh
    } else if (last !== undefined && last.size === 0) {
      // An empty last segment is what a roll, or the segment made above, leaves before its first
      // write, and maybe without the fsync of its entry (an open that failed there): synced again,
      // or the appends made durable in it could go with its entry in a crash of the machine.
      try {
        await fs.syncDir(path)
      } catch (error) {
        await active?.close().catch(() => undefined)
        throw error
      }
    }
    // Records the ledger counts unacknowledged below the first segment left (or, with none left,
    // below nextSeq) are gone with their segment. A segment is deleted only after a checkpoint
    // saved the prefix past it, so no crash leaves this: deleted from outside (lost), or an older
    // ledger restored. Buffers written before that rule may show it once after a crash, hence
    // both readings in the message.
    const resumesAt = segments[0]?.firstSeq ?? numbered
    if (known !== undefined && known.ackedBelow < resumesAt) {
      s.log(
        `disk buffer ${path}: records ${known.ackedBelow}..${resumesAt - 1}, which ${Ledger.FILE} counts unacknowledged, are gone: the segment(s) holding them are not on disk (${segments[0] === undefined ? 'none is left' : `the first one left is ${segments[0].name}`}). This buffer deletes a segment only after ${Ledger.FILE} saved its records acknowledged, so they were deleted from outside the buffer (those records are lost) or an older ${Ledger.FILE} was restored; only an earlier version, which deleted first and saved after, left this after a crash with nothing lost. Delivering from record ${resumesAt}`,
      )
    }
    let ackedBelow = known?.ackedBelow ?? segments[0]?.firstSeq ?? nextSeq
    ackedBelow = Math.min(Math.max(ackedBelow, segments[0]?.firstSeq ?? nextSeq), nextSeq)
    if (ledger.status === 'corrupt' || (ledger.status === 'missing' && segments.length > 0)) {
      s.log(
        `disk buffer ${path}: ledger ${ledger.status === 'missing' ? 'missing' : `corrupt (${ledger.reason})`}; rebuilt by scanning ${segments.length} segment(s), redelivering from sequence ${ackedBelow}`,
      )
    }
    return { settings: s, segments, active, nextSeq, ackedBelow, tornBytes, ledgerOk: ledger.status === 'ok' }
  },
} as const
