// The disk buffer's options, declared once: the same rules and wording at build (the factory's
// validate) and at a direct open (a DiskBufferError naming the field), JSON Schema for configs.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  DiskBuffer,
  DiskBufferError,
  DiskBufferFactoryOptions,
  DiskEdgeBufferOptions,
  diskBuffer,
  openDiskBuffer,
} from '@ackline/buffers'
import { ComponentError, TopologyBuilder, TopologyError } from '@ackline/topology'
import { afterEach, describe, expect, it } from 'vitest'

const dirs: string[] = []
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'ackline-options-'))
  dirs.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** Each bad enumerated option, with the field and the wording every path reports. */
const badEnumerations = [
  {
    options: { whenFull: 'spill' },
    field: 'whenFull',
    message: 'must be "block" or "drop_newest", got "spill"',
  },
  {
    options: { sync: 'sometimes' },
    field: 'sync',
    message: 'must be "always" or an object, got "sometimes"',
  },
  {
    options: { acknowledgements: 'on-ack' },
    field: 'acknowledgements',
    message: 'must be "on-write" or "on-delivery", got "on-ack"',
  },
] as const

describe('disk buffer options', () => {
  it.each(badEnumerations)(
    'reports a bad $field from the factory, at build',
    ({ options, field, message }) => {
      const factory = diskBuffer(options as unknown as DiskBufferFactoryOptions)
      expect(factory.validate?.({ componentId: 'out', dataDir: '/var/lib/ackline' })).toEqual([
        expect.objectContaining({ field, message }),
      ])
    },
  )

  it.each(badEnumerations)(
    'throws a DiskBufferError INVALID_OPTION naming $field on a direct open, before touching the disk',
    async ({ options, field, message }) => {
      const path = join(tempDir(), 'never-created')
      const error = await openDiskBuffer({
        path,
        sinkId: 'out',
        ...(options as unknown as Partial<DiskEdgeBufferOptions>),
      }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(DiskBufferError)
      expect(error).toBeInstanceOf(ComponentError)
      expect(error).toMatchObject({ name: 'DiskBufferError', code: 'INVALID_OPTION', field, path })
      expect((error as Error).message).toBe(`disk buffer ${path}: ${field} ${message}`)
      expect(existsSync(path)).toBe(false)
    },
  )

  it('refuses a ledger interval or a group-commit interval longer than a timer can wait (2^31 - 1 ms)', () => {
    const longest = 2_147_483_647
    for (const [options, field] of [
      [{ ledgerIntervalMs: longest + 1 }, 'ledgerIntervalMs'],
      [{ sync: { everyMs: 30 * 24 * 3_600_000, everyWrites: 10 } }, 'sync.everyMs'],
    ] as const) {
      expect(DiskBufferFactoryOptions.validate(options)).toEqual([expect.objectContaining({ field })])
    }
    expect(DiskBufferFactoryOptions.validate({ ledgerIntervalMs: longest })).toEqual([])
  })

  it('reports a misspelt option rather than ignoring it', async () => {
    expect(DiskBufferFactoryOptions.validate({ whenfull: 'block' })).toEqual([
      expect.objectContaining({ field: 'whenfull' }),
    ])
    const path = tempDir()
    await expect(
      DiskBuffer.open({ path, maxbytes: 10 } as unknown as Parameters<typeof DiskBuffer.open>[0]),
    ).rejects.toMatchObject({ code: 'INVALID_OPTION', field: 'maxbytes' })
  })

  it("files options that are not an object under the sink's buffer field", () => {
    const build = () =>
      new TopologyBuilder({ dataDir: tempDir() })
        .source('in', { kind: 'test', canAcknowledge: true, async run() {} })
        .sink(
          'out',
          ['in'],
          {
            kind: 'test',
            async write() {
              return undefined
            },
          },
          { buffer: diskBuffer(5 as never) },
        )
        .build()
    expect(build).toThrow(TopologyError)
    expect(() => build()).toThrow(
      expect.objectContaining({ problems: [expect.objectContaining({ field: 'buffer' })] }),
    )
  })

  it('describes what a config file can give as JSON Schema, without the options only code can give', () => {
    const schema = DiskBufferFactoryOptions.jsonSchema() as { properties: Record<string, unknown> }
    expect(schema.properties.whenFull).toMatchObject({ enum: ['block', 'drop_newest'], default: 'block' })
    expect(schema.properties.acknowledgements).toMatchObject({ default: 'on-delivery' })
    expect(schema.properties).not.toHaveProperty('log')
    expect(DiskEdgeBufferOptions.jsonSchema()).not.toHaveProperty('properties.fileSystem')
  })
})
