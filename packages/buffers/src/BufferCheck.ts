/**
 * Checking (and repairing) a disk buffer directory from the outside, as the `ackline-buffer`
 * command does.
 *
 * Invariant: a check without `repair` changes nothing (it takes no lock and writes no file);
 * a repair takes the lock, refuses a directory a live process holds, and only ever removes bytes
 * that no reader could deliver (torn tails, damaged regions), rebuilds what can be derived from
 * the segments (the ledger), and reports every change it made.
 *
 * @module
 */
import { hostname } from 'node:os'
import { BufferSettings } from './internal/BufferSettings.js'
import { type FileLike, type FileSystem, NodeFileSystem, openExisting } from './internal/FileSystem.js'
import { Frame } from './internal/Frame.js'
import { Ledger, type LedgerRead } from './internal/Ledger.js'
import { LockFile, type LockHolder } from './internal/LockFile.js'
import { SEGMENT_NAME, segmentFirstSeq } from './internal/Segment.js'
import { SegmentReader } from './internal/SegmentReader.js'

/** What was found in one segment file. */
export interface SegmentCheck {
  /** The segment's file name. */
  readonly name: string
  /** The file's size. */
  readonly bytes: number
  /** Valid records in the file. */
  readonly records: number
  /** Valid records at or above the acknowledged position. */
  readonly unacked: number
  /** The first valid record's sequence number, or `undefined` when the file holds none. */
  readonly firstSeq: number | undefined
  /** The last valid record's sequence number, or `undefined` when the file holds none. */
  readonly lastSeq: number | undefined
  /** Damaged regions followed by valid frames (skipped when reading). */
  readonly corrupt: readonly { readonly offset: number; readonly bytes: number }[]
  /** Damage running to the end of the file (a torn write), if any. */
  readonly torn: { readonly offset: number; readonly bytes: number } | undefined
  /**
   * Whether opening leaves the file alone (not a segment of this buffer: its first record does not
   * fit its name, or its name lies inside the records of the segment before it). Such a file is
   * reported, but its records are not counted and `repair` neither cuts nor rewrites it.
   */
  readonly leftAlone: boolean
}

/** What a check found, and what a repair did. */
export interface BufferCheckReport {
  /** The buffer directory checked. */
  readonly path: string
  /** What reading the ledger (the checkpoint of acknowledged records) found. */
  readonly ledger: LedgerRead
  /** A `ledger.json.tmp` left by a crash between writing and renaming the ledger. */
  readonly tempLedger: boolean
  /** The lock file's holder and whether that process is alive, or `undefined` when no lock file exists. */
  readonly lock: { readonly holder: LockHolder; readonly live: boolean } | undefined
  /** Every segment file, in sequence order. */
  readonly segments: readonly SegmentCheck[]
  /** The acknowledged position: the ledger's, or the first segment opening keeps when the ledger is unusable. */
  readonly ackedBelow: number
  /**
   * Valid records in all segments (not in the files opening leaves alone, nor in a segment a repair
   * found deleted from outside before it cut its torn tail).
   */
  readonly records: number
  /** Valid records at or above the acknowledged position: what a reader would be handed (from the segments opening keeps, and that are still there). */
  readonly unacked: number
  /** The dead-letter queue's own report, if the directory has one. */
  readonly deadLetter: BufferCheckReport | undefined
  /** Everything wrong, one sentence each; empty when the buffer is clean. */
  readonly problems: readonly string[]
  /** What is worth knowing but not wrong (no checkpoint yet), one sentence each. */
  readonly notes: readonly string[]
  /** What `repair` changed, one sentence each. */
  readonly repairs: readonly string[]
}

async function checkSegment(
  fs: FileSystem,
  path: string,
  name: string,
  ackedBelow: number,
): Promise<Omit<SegmentCheck, 'leftAlone'> & { readonly validEnd: number }> {
  const bytes = (await fs.size(`${path}/${name}`)) ?? 0
  const file = await fs.open(`${path}/${name}`, 'read')
  try {
    const reader = new SegmentReader(file, {
      start: 0,
      end: bytes,
      maxPayload: Math.max(bytes, 1),
      chunkBytes: 8 << 20,
      payloads: false,
    })
    let records = 0
    let unacked = 0
    let firstSeq: number | undefined
    let lastSeq: number | undefined
    let validEnd = 0
    let torn: SegmentCheck['torn']
    const corrupt: { offset: number; bytes: number }[] = []
    for (;;) {
      const items = await reader.read(4096)
      if (items.length === 0) break
      for (const item of items) {
        if (item.kind === 'record') {
          records++
          if (item.seq >= ackedBelow) unacked++
          firstSeq ??= item.seq
          lastSeq = item.seq
          validEnd = item.offset + item.size
        } else if (item.kind === 'corrupt') {
          corrupt.push({ offset: item.offset, bytes: item.bytes })
        } else {
          torn = { offset: item.offset, bytes: item.bytes }
        }
      }
    }
    return { name, bytes, records, unacked, firstSeq, lastSeq, corrupt, torn, validEnd }
  } finally {
    await file.close()
  }
}

/**
 * What `step` gives, or its error with `file` in front of the message when the message does not
 * name it (`EISDIR: illegal operation on a directory, read` says nothing of which entry is one).
 */
async function about<T>(file: string, step: Promise<T>): Promise<T> {
  try {
    return await step
  } catch (error) {
    if (error instanceof Error && !error.message.includes(file)) error.message = `${file}: ${error.message}`
    throw error
  }
}

/** What {@link rewriteSegment} names the copy of a segment it renames into place. */
const REPAIR_SUFFIX = '.repair'
/** Such a copy, left by a repair cut short (a crash, a full disk). */
const REPAIR_COPY = /^\d{20}\.seg\.repair$/

/**
 * Rewrites a segment with only its valid frames: temp file, fsync, rename, directory fsync. A
 * rewrite that fails (a full disk, often why a repair is run) removes its copy: the segment is as
 * it was. So does one whose rename fails (the rename is all or nothing); after a rename, the copy
 * is the segment, and there is nothing left under its name to remove.
 */
async function rewriteSegment(fs: FileSystem, path: string, name: string): Promise<void> {
  const temp = `${path}/${name}${REPAIR_SUFFIX}`
  try {
    await copyValidFrames(fs, `${path}/${name}`, temp)
    await fs.rename(temp, `${path}/${name}`)
  } catch (error) {
    await fs.unlink(temp).catch(() => undefined)
    throw error
  }
  await fs.syncDir(path)
}

/** Writes the valid frames of segment file `from` to `to`, durably. */
async function copyValidFrames(fs: FileSystem, from: string, to: string): Promise<void> {
  const source = await fs.open(from, 'read')
  let target: FileLike | undefined
  try {
    target = await fs.open(to, 'truncate')
    const size = await source.size()
    const reader = new SegmentReader(source, { start: 0, end: size, maxPayload: Math.max(size, 1) })
    let position = 0
    for (;;) {
      const items = await reader.read(4096)
      if (items.length === 0) break
      for (const item of items) {
        if (item.kind !== 'record') continue
        const { bytes } = Frame.encode([item.payload], item.seq)
        position += await target.writev([bytes], position)
      }
    }
    await target.datasync()
  } finally {
    await source.close()
    await target?.close()
  }
}

/**
 * Checks a buffer directory, and with `repair` fixes what it can. An entry it cannot read (a
 * directory where the lock, the ledger or a segment belongs) rejects with the system error, the
 * entry's path in its message.
 *
 * @example
 * ```ts
 * const report = await BufferCheck.run('/var/lib/ackline/file-out')
 * console.log(BufferCheck.format(report))
 * if (report.problems.length > 0) await BufferCheck.run(path, { repair: true })
 * ```
 */
export const BufferCheck = {
  async run(
    path: string,
    options: {
      readonly repair?: boolean
      /**
       * With `repair`: remove the lock even though it counts as held (another host's, an
       * unreadable one, a live pid), for an operator who knows its process is gone.
       */
      readonly breakLock?: boolean
      readonly fileSystem?: FileSystem
    } = {},
  ): Promise<BufferCheckReport> {
    const fs = options.fileSystem ?? NodeFileSystem
    const repair = options.repair === true
    const problems: string[] = []
    const notes: string[] = []
    const repairs: string[] = []
    const names = (await fs.readdir(path)).sort()
    // The lock's name for the directory, as a buffer opening it uses (a symbolic link resolved).
    const lockDir = await LockFile.canonical(fs, path)
    const read = await about(`${path}/lock`, LockFile.read(fs, path))
    const holder = read === 'unreadable' ? undefined : read
    const lock = holder === undefined ? undefined : { holder, live: LockFile.isLive(fs, holder, lockDir) }
    const elsewhere = holder !== undefined && holder.hostname !== hostname()
    let locked = false
    if (read === 'unreadable') {
      problems.push(
        `the lock file is unreadable (empty or cut short): it counts as held; if no process uses this buffer, break it with --repair --break-lock`,
      )
    } else if (elsewhere) {
      problems.push(
        `locked by process ${holder.pid} on ${holder.hostname}, another host: whether it is alive cannot be checked here; if no process there uses this buffer, break the lock with --repair --break-lock`,
      )
    } else if (lock?.live === true) {
      problems.push(`locked by live process ${holder!.pid} on ${holder!.hostname}: the buffer is in use`)
    } else if (lock !== undefined) {
      problems.push(`stale lock of process ${holder!.pid} on ${holder!.hostname}`)
    }
    const guard = await about(`${path}/${LockFile.GUARD}`, LockFile.guardHolder(fs, path))
    const guardLive = guard !== undefined && guard !== 'unreadable' && LockFile.isLive(fs, guard, lockDir)
    if (guardLive) {
      problems.push(`the lock is being taken over by live process ${guard.pid} on ${guard.hostname}`)
    } else if (guard !== undefined) {
      problems.push(
        `${LockFile.GUARD} left by a process that died while taking the lock over${guard === 'unreadable' ? ' (unreadable)' : ` (process ${guard.pid} on ${guard.hostname})`}`,
      )
    }
    const held = read === 'unreadable' || lock?.live === true || guardLive
    const breakLock = repair && options.breakLock === true && held
    const canRepair = repair && (!held || breakLock)
    if (repair && !canRepair) {
      problems.push(
        `not repairing a buffer a live process holds${read === 'unreadable' || elsewhere ? ' (if you know its holder is gone, add --break-lock)' : ''}`,
      )
    }
    if (breakLock) {
      await LockFile.breakLock(fs, path)
      repairs.push(
        `broke the lock${read === 'unreadable' ? ' (unreadable)' : holder === undefined ? ' (its takeover guard)' : ` of process ${holder.pid} on ${holder.hostname}`} (--break-lock)`,
      )
    } else if (canRepair) {
      if (guard !== undefined) {
        await fs.unlink(`${path}/${LockFile.GUARD}`)
        repairs.push(`removed ${LockFile.GUARD}`)
      }
      if (lock !== undefined) repairs.push(`took over the stale lock of process ${holder!.pid}`)
    }
    if (canRepair) {
      await LockFile.acquire(fs, lockDir)
      locked = true
    }
    try {
      const tempLedger = names.includes(Ledger.TEMP)
      if (tempLedger) {
        problems.push(
          `${Ledger.TEMP} left by a crash between writing and renaming the ledger (the old ledger is used)`,
        )
        if (canRepair) {
          await about(`${path}/${Ledger.TEMP}`, fs.unlink(`${path}/${Ledger.TEMP}`))
          repairs.push(`removed ${Ledger.TEMP}`)
        }
      }
      const strayTemps = [
        ...(names.includes(BufferSettings.TEMP) ? [BufferSettings.TEMP] : []),
        ...(await LockFile.strayTemps(fs, path, names)),
      ]
      for (const temp of strayTemps) {
        problems.push(
          `${temp} left by a crash between writing a file and putting it in place (opening removes it; it is not used)`,
        )
        if (canRepair) {
          await about(`${path}/${temp}`, fs.unlink(`${path}/${temp}`))
          repairs.push(`removed ${temp}`)
        }
      }
      for (const copy of names.filter((n) => REPAIR_COPY.test(n))) {
        problems.push(
          `${copy} left by a repair cut short (a crash, a full disk): a partial copy of ${copy.slice(0, -REPAIR_SUFFIX.length)}, which it did not replace`,
        )
        if (canRepair) {
          await about(`${path}/${copy}`, fs.unlink(`${path}/${copy}`))
          repairs.push(`removed ${copy}`)
        }
      }
      const ledger = await about(`${path}/ledger.json`, Ledger.read(fs, path))
      if (ledger.status === 'missing') {
        // Normal after a crash that came before the first checkpoint: open rebuilds it by scanning.
        notes.push(
          'no checkpoint yet (ledger missing): opening rebuilds it from the segments, delivering every record on disk',
        )
      }
      if (ledger.status === 'corrupt') problems.push(`ledger corrupt (${ledger.reason})`)
      // Opening goes by the checkpoint before it (logged); a repair drops what is not whole.
      if (ledger.status === 'ok' && ledger.passedOver !== undefined) {
        problems.push(
          `the last checkpoint in the ledger is not whole (${ledger.passedOver}): opening goes by the one before it`,
        )
      }
      // Read as opening reads it: an entry opening fails on is named here, not found clean.
      const settings = await about(`${path}/${BufferSettings.FILE}`, BufferSettings.read(fs, path))
      if (settings.status === 'corrupt') {
        notes.push(
          `${BufferSettings.FILE} is damaged (${settings.reason}): opening stores the segment size of its options in its place (records are read whatever their size)`,
        )
      }
      const segNames = names.filter((n) => segmentFirstSeq(n) !== undefined)
      for (const name of names.filter((n) => SEGMENT_NAME.test(n) && segmentFirstSeq(n) === undefined)) {
        problems.push(
          `${name} is named like a segment, but its number is past 2^53: not a segment of this buffer (opening leaves it alone; remove it)`,
        )
      }
      const ledgerAckedBelow = ledger.status === 'ok' ? ledger.ledger.ackedBelow : undefined
      const segments: SegmentCheck[] = []
      /** The segments opening keeps (not the files it leaves alone), and their names: what is counted and repaired. */
      const keptSegments: SegmentCheck[] = []
      const keptNames: string[] = []
      let ledgerAhead = false
      /** Whether a record lies past the numbers opening would give new records. */
      let reused = false
      /** The acknowledged position to save when repairing the last segment's tail left the ledger ahead of the records. */
      let cappedAt: number | undefined
      /** Where the records on disk resume, when the ledger counts records below it unacknowledged (they are gone). */
      let goneUpTo: number | undefined
      let lastSeq = -1
      /** What a repair says of each segment missing between or after the segments left (the ledger is saved without them). */
      const missingSegments: string[] = []
      /** Segments a repair found deleted from outside before it cut their torn tail: their records are not counted. */
      const gone = new Set<SegmentCheck>()
      for (const [i, name] of segNames.entries()) {
        const named = segmentFirstSeq(name)!
        // With no usable ledger, records count from the first segment kept: this one, if none is yet.
        const from = ledgerAckedBelow ?? (keptNames[0] === undefined ? named : segmentFirstSeq(keptNames[0])!)
        const seg = await about(`${path}/${name}`, checkSegment(fs, path, name, from))
        const { validEnd, ...checked } = seg
        const kept = keptSegments.at(-1)
        const next = segNames[i + 1] === undefined ? undefined : segmentFirstSeq(segNames[i + 1]!)!
        let leftAlone = true
        // As opening judges: the last segment has no next one to stay below.
        if (
          seg.firstSeq !== undefined &&
          (seg.firstSeq < named || (next !== undefined && seg.firstSeq >= next))
        ) {
          problems.push(
            `${name}: its first record is numbered ${seg.firstSeq}, outside ${named}..${next === undefined ? '' : next - 1}: not a segment of this buffer (copied in or renamed; opening leaves it alone; move it out)`,
          )
        } else if (kept?.lastSeq !== undefined && kept.lastSeq >= named) {
          // This buffer names a segment after the record that rolled it, past every one before.
          problems.push(
            `${name}: its name lies inside the records of ${kept.name}, which run to ${kept.lastSeq}: not a segment of this buffer (copied in, renamed or restored; opening leaves it alone; move it out)`,
          )
        } else {
          leftAlone = false
        }
        const check = { ...checked, leftAlone }
        segments.push(check)
        // Not this buffer's: its records are not counted, its damage is not repaired (opening never reads it).
        if (leftAlone) continue
        keptSegments.push(check)
        keptNames.push(name)
        if (seg.lastSeq !== undefined) lastSeq = Math.max(lastSeq, seg.lastSeq)
        for (const c of seg.corrupt) {
          problems.push(`segment ${name}: checksum failure at offset ${c.offset}, ${c.bytes} bytes damaged`)
        }
        if (seg.torn !== undefined) {
          problems.push(`segment ${name}: torn write of ${seg.torn.bytes} bytes at offset ${seg.torn.offset}`)
        }
        if (!canRepair) continue
        if (seg.corrupt.length > 0) {
          await rewriteSegment(fs, path, name)
          repairs.push(
            `segment ${name}: rewrote without ${seg.corrupt.length} damaged region(s)${seg.torn ? ' and its torn tail' : ''}`,
          )
        } else if (seg.torn !== undefined) {
          let file: FileLike
          try {
            // Never made: one deleted from outside since it was read, made again and cut to
            // `validEnd`, was that many zero bytes posing as its records.
            file = await openExisting(fs, `${path}/${name}`, 'append')
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
            repairs.push(
              `segment ${name}: gone (deleted from outside) before its torn tail was cut; nothing cut`,
            )
            gone.add(check)
            continue
          }
          try {
            await file.truncate(validEnd)
            await file.datasync()
          } finally {
            await file.close()
          }
          repairs.push(`segment ${name}: cut ${seg.torn.bytes} torn bytes at offset ${validEnd}`)
        }
      }
      // Opening numbers the next record past the last segment's records: past 2^53 − 1 there is no
      // number, and it refuses the buffer (SEQUENCE_EXHAUSTED), whatever the ledger says.
      const firstOnDisk = keptNames.length > 0 ? segmentFirstSeq(keptNames[0]!)! : 0
      const ackedBelow = ledgerAckedBelow ?? firstOnDisk
      const last = keptSegments.at(-1)
      if (last?.lastSeq === Number.MAX_SAFE_INTEGER) {
        problems.push(
          `segment ${last.name} holds a record numbered ${last.lastSeq}, the last sequence number (2^53 − 1): no number is left for the next record, and opening refuses the buffer (SEQUENCE_EXHAUSTED). No buffer counts that far: the segment came from elsewhere (copied, edited); move it out of the directory, or give the buffer a new path`,
        )
      }
      if (ledger.status === 'ok') {
        const onDisk = keptNames.map((n) => segmentFirstSeq(n)!)
        for (const first of ledger.ledger.segments) {
          if (first >= ackedBelow && !onDisk.includes(first)) {
            // Between the segments left, the records it held are lost (opening skips them as
            // missing); one before the first segment left is reported below with the records gone.
            const after = onDisk.findIndex((seq) => seq > first)
            if (after > 0 || (after === -1 && onDisk.length > 0)) {
              const before = keptSegments[after === -1 ? keptSegments.length - 1 : after - 1]!
              const from = Math.max(first, ackedBelow, (before.lastSeq ?? -1) + 1)
              // After the last segment left, its records end where the next one listed starts, or
              // at the ledger's next number (records written after it was saved are not known).
              const listedNext = ledger.ledger.segments.find((seq) => seq > first) ?? Number.POSITIVE_INFINITY
              const to = (after === -1 ? Math.min(listedNext, ledger.ledger.nextSeq) : onDisk[after]!) - 1
              const lostRecords = from <= to ? `records ${from}..${to}` : undefined
              problems.push(
                `segment starting at ${first} is listed in the ledger but missing${lostRecords === undefined ? '' : `: ${lostRecords}, which the ledger counts unacknowledged, are lost with it (opening skips them as missing and delivers the rest)`}`,
              )
              missingSegments.push(
                `segment starting at ${first} is missing${lostRecords === undefined ? '' : `: ${lostRecords}, which the ledger counts unacknowledged, are lost`}; the ledger no longer lists it`,
              )
            } else {
              problems.push(`segment starting at ${first} is listed in the ledger but missing`)
            }
          }
        }
        // As opening warns: a segment goes only once the ledger saved its records acknowledged,
        // so records it counts unacknowledged below the first segment left were deleted from
        // outside (lost), or an older ledger was restored. With no segment left, they end at its
        // next number.
        const resumesAt = keptNames.length > 0 ? firstOnDisk : ledger.ledger.nextSeq
        if (ackedBelow < resumesAt) {
          problems.push(
            `records ${ackedBelow}..${resumesAt - 1}, which the ledger counts unacknowledged, are gone: the segment(s) holding them are not on disk (${keptNames.length === 0 ? 'none is left' : `the first one left is ${keptNames[0]}`}); deleted from outside the buffer (lost), or an older ledger was restored. Opening delivers from record ${resumesAt}; --repair moves the ledger's acknowledged position there`,
          )
          goneUpTo = resumesAt
        }
        const dataEnd = last === undefined ? 0 : Math.max(lastSeq + 1, Number(last.name.slice(0, 20)))
        if (lastSeq >= 0 && last?.torn === undefined && ackedBelow > dataEnd) {
          problems.push(
            `the ledger's acknowledged position ${ackedBelow} lies past the records on disk (the last is ${lastSeq}): it does not belong to these segments, and opening refuses it (LEDGER_AHEAD); --repair rebuilds it from the segments, delivering every record on disk again`,
          )
          ledgerAhead = true
        } else if (canRepair && lastSeq >= 0 && last?.torn !== undefined && ackedBelow > dataEnd) {
          // Opening cuts a damaged tail and then trusts the ledger; once the repair cut it, the next
          // open would find the ledger ahead of the records and refuse it (LEDGER_AHEAD).
          cappedAt = dataEnd
        }
        // Opening numbers new records from past the ledger's next number and the last segment's
        // records, so a ledger saved before the last records were written (a crash, a checkpoint
        // that failed at close) is no problem: only a record past that, in an earlier segment,
        // would see its number given again.
        const numbersFrom = Math.max(
          (last?.lastSeq ?? -1) + 1,
          last === undefined ? 0 : Number(last.name.slice(0, 20)),
          ledger.ledger.nextSeq,
          ackedBelow,
        )
        if (lastSeq >= numbersFrom) {
          reused = true
          problems.push(
            `record ${lastSeq} lies past where opening numbers new records (from ${numbersFrom}: the ledger's next number ${ledger.ledger.nextSeq}, the last segment's records): its number would be given again`,
          )
        }
      }
      const ledgerBad = ledger.status !== 'ok' || reused || ledgerAhead
      const repairsBefore = repairs.length
      if (canRepair && ledgerBad) {
        // A ledger ahead of the data is not trusted at all: redeliver from the first record on disk.
        const from = ledgerAhead ? firstOnDisk : Math.max(ackedBelow, goneUpTo ?? 0)
        const nextSeq = ledgerAhead
          ? Math.max(lastSeq + 1, from)
          : Math.max(lastSeq + 1, ledger.status === 'ok' ? ledger.ledger.nextSeq : 0, from)
        if (nextSeq > Number.MAX_SAFE_INTEGER) {
          // A ledger saying 2^53 reads as corrupt: written, it would be worse than the one there.
          problems.push(
            `not rebuilding the ledger: record ${lastSeq} is numbered 2^53 − 1, which leaves no number for the next record`,
          )
        } else {
          await Ledger.write(fs, path, {
            nextSeq,
            ackedBelow: Math.min(from, nextSeq),
            segments: keptNames.map((n) => segmentFirstSeq(n)!),
          })
          repairs.push(`rebuilt the ledger from the segments (acknowledged below ${from}, next ${nextSeq})`)
        }
      } else if (ledger.status === 'ok' && cappedAt !== undefined) {
        await Ledger.write(fs, path, {
          nextSeq: ledger.ledger.nextSeq,
          ackedBelow: cappedAt,
          segments: keptNames.map((n) => segmentFirstSeq(n)!),
        })
        repairs.push(
          `moved the ledger's acknowledged position from ${ackedBelow} to ${cappedAt}, the end of the records left once the damaged tail was cut (opening refuses a ledger ahead of them)`,
        )
      } else if (canRepair && ledger.status === 'ok' && goneUpTo !== undefined) {
        await Ledger.write(fs, path, {
          nextSeq: Math.max(ledger.ledger.nextSeq, goneUpTo),
          ackedBelow: goneUpTo,
          segments: keptNames.map((n) => segmentFirstSeq(n)!),
        })
        repairs.push(
          `moved the ledger's acknowledged position from ${ackedBelow} to ${goneUpTo}, where the records on disk resume (records ${ackedBelow}..${goneUpTo - 1} are gone)`,
        )
      } else if (
        canRepair &&
        ledger.status === 'ok' &&
        (ledger.passedOver !== undefined || missingSegments.length > 0)
      ) {
        // Listing the segments on disk, as opening's first checkpoint would.
        await Ledger.write(fs, path, {
          ...ledger.ledger,
          segments: keptNames.map((n) => segmentFirstSeq(n)!),
        })
        repairs.push(
          ledger.passedOver !== undefined
            ? 'rewrote the ledger with its last whole checkpoint'
            : 'rewrote the ledger listing the segments on disk',
        )
      }
      // Every ledger written above lists the segments on disk: say what the missing ones took.
      if (repairs.length > repairsBefore) repairs.push(...missingSegments)
      const deadLetter = names.includes('dead-letter')
        ? await BufferCheck.run(`${path}/dead-letter`, { repair: canRepair, fileSystem: fs })
        : undefined
      if (deadLetter !== undefined) {
        // The dead-letter queue lives under this buffer's lock and may legitimately have no ledger yet.
        for (const p of deadLetter.problems) problems.push(`dead-letter: ${p}`)
        for (const r of deadLetter.repairs) repairs.push(`dead-letter: ${r}`)
      }
      return {
        path,
        ledger,
        tempLedger,
        lock,
        segments,
        ackedBelow,
        records: keptSegments.reduce((n, s) => n + (gone.has(s) ? 0 : s.records), 0),
        unacked: keptSegments.reduce((n, s) => n + (gone.has(s) ? 0 : s.unacked), 0),
        deadLetter,
        problems,
        notes,
        repairs,
      }
    } finally {
      if (locked) await LockFile.release(fs, lockDir)
    }
  },

  /** The report as the command prints it. */
  format(report: BufferCheckReport): string {
    const lines: string[] = [`buffer ${report.path}`]
    const l = report.ledger
    lines.push(
      l.status === 'ok'
        ? `  ledger: ok (acknowledged below ${l.ledger.ackedBelow}, next sequence ${l.ledger.nextSeq})`
        : `  ledger: ${l.status}${l.status === 'corrupt' ? ` (${l.reason})` : ''}`,
    )
    lines.push(`  acknowledged position: ${report.ackedBelow}`)
    if (report.lock !== undefined) {
      lines.push(
        `  lock: process ${report.lock.holder.pid} on ${report.lock.holder.hostname} (${report.lock.live ? 'live' : 'stale'})`,
      )
    }
    lines.push(
      `  segments: ${report.segments.length}, records: ${report.records}, unacknowledged: ${report.unacked}`,
    )
    for (const s of report.segments) {
      const range = s.firstSeq === undefined ? 'empty' : `seq ${s.firstSeq}..${s.lastSeq}`
      const damage = s.corrupt.length + (s.torn === undefined ? 0 : 1)
      lines.push(
        `    ${s.name}  ${s.bytes} bytes  ${s.records} records  ${range}${s.leftAlone ? '  LEFT ALONE (not counted)' : damage > 0 ? `  DAMAGED (${damage})` : ''}`,
      )
    }
    if (report.deadLetter !== undefined) {
      lines.push(`  dead letters: ${report.deadLetter.unacked}`)
    }
    for (const n of report.notes) lines.push(`  note: ${n}`)
    lines.push(
      report.problems.length === 0 ? '  no problems found' : `  problems (${report.problems.length}):`,
    )
    for (const p of report.problems) lines.push(`    - ${p}`)
    if (report.repairs.length > 0) {
      lines.push(`  repairs (${report.repairs.length}):`)
      for (const r of report.repairs) lines.push(`    - ${r}`)
    }
    return lines.join('\n')
  },
} as const
