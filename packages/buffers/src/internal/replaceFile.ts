/**
 * Replaces a small file of the buffer's directory atomically: after a crash at any point the file
 * holds either its old content or the new one, never a mix, and once this resolves the new
 * content and its name are durable.
 */
import type { FileSystem } from './FileSystem.js'

/** Writes `bytes` to `temp`, fsyncs it, renames it over `name`, then fsyncs the directory. */
export async function replaceFile(
  fs: FileSystem,
  dir: string,
  name: string,
  temp: string,
  bytes: Uint8Array,
): Promise<void> {
  const path = `${dir}/${temp}`
  const file = await fs.open(path, 'truncate')
  try {
    await file.writev([bytes], 0)
    await file.datasync()
  } finally {
    await file.close()
  }
  await fs.rename(path, `${dir}/${name}`)
  await fs.syncDir(dir)
}
