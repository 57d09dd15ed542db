import { posix } from 'node:path'
import { Readable } from 'node:stream'
import { constants, createGzip, gunzip } from 'node:zlib'
import { extract, pack } from 'tar-stream'

/**
 * The workspace archive: a gzipped tar of prompt files and manifest.json, written and read with
 * tar-stream and node:zlib (no tar code by hand). Reading is bounded three ways against tar
 * bombs: the uncompressed size (zlib's maxOutputLength), the number of entries, and each
 * entry's size. Links, devices and paths that leave the archive (`../x`, `/x`) refuse the whole
 * archive: nothing of it is imported.
 */

export interface ArchiveLimits {
  /** Uncompressed bytes in all. */
  maxBytes: number
  maxEntries: number
  maxEntryBytes: number
}

export const ARCHIVE_LIMITS: ArchiveLimits = {
  maxBytes: 50 * 1024 * 1024,
  maxEntries: 1000,
  maxEntryBytes: 1024 * 1024 + 1,
}

export class ArchiveError extends Error {
  override name = 'ArchiveError'
}

export interface ArchiveEntry {
  name: string
  bytes: Buffer
}

export function isArchiveName(name: string): boolean {
  return /\.(tar\.gz|tgz)$/i.test(name)
}

function gunzipBounded(bytes: Buffer, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    gunzip(bytes, { maxOutputLength: maxBytes }, (err, out) => {
      if (!err) return resolve(out)
      if (err instanceof RangeError || (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE')
        reject(new ArchiveError(`the archive unpacks to more than ${maxBytes} bytes`))
      else reject(new ArchiveError('the file is not a gzip archive'))
    })
  })
}

/** A safe relative path inside the archive, or an ArchiveError naming the entry. */
function safePath(name: string): string {
  if (name.includes('\\') || name.includes('\0'))
    throw new ArchiveError(`unsafe path in the archive: ${name}`)
  if (name.startsWith('/')) throw new ArchiveError(`absolute path in the archive: ${name}`)
  if (name.split('/').includes('..')) throw new ArchiveError(`path leaving the archive: ${name}`)
  const normal = posix.normalize(name)
  if (normal.startsWith('..') || normal.startsWith('/'))
    throw new ArchiveError(`path leaving the archive: ${name}`)
  return normal.replace(/^\.\//, '')
}

/** The regular files of a tar.gz, checked whole before any is returned. */
export async function readArchive(
  bytes: Buffer,
  limits: ArchiveLimits = ARCHIVE_LIMITS,
): Promise<ArchiveEntry[]> {
  const tarBytes = await gunzipBounded(bytes, limits.maxBytes)
  const entries: ArchiveEntry[] = []
  const ex = extract()
  const done = (async () => {
    let count = 0
    for await (const entry of ex) {
      const { header } = entry
      count++
      if (count > limits.maxEntries) {
        entry.resume()
        throw new ArchiveError(`the archive has more than ${limits.maxEntries} entries`)
      }
      const type = header.type ?? 'file'
      if (type === 'directory') {
        safePath(header.name)
        entry.resume()
        continue
      }
      if (type !== 'file' && type !== 'contiguous-file') {
        entry.resume()
        throw new ArchiveError(
          `the archive holds a ${type} entry (${header.name}): only plain files are accepted`,
        )
      }
      const name = safePath(header.name)
      if ((header.size ?? 0) > limits.maxEntryBytes) {
        entry.resume()
        throw new ArchiveError(`${name} is larger than ${limits.maxEntryBytes - 1} bytes`)
      }
      const chunks: Buffer[] = []
      for await (const chunk of entry) chunks.push(chunk as Buffer)
      entries.push({ name, bytes: Buffer.concat(chunks) })
    }
  })()
  Readable.from([tarBytes]).pipe(ex)
  try {
    await done
  } catch (err) {
    ex.destroy()
    if (err instanceof ArchiveError) throw err
    throw new ArchiveError(`the archive is not a valid tar file: ${(err as Error).message}`)
  }
  return entries
}

/** A tar.gz stream of the files `files` yields, written as they come. */
export function writeArchive(files: AsyncIterable<{ name: string; text: string }>): Readable {
  const archive = pack()
  const gzip = createGzip({ level: constants.Z_DEFAULT_COMPRESSION })
  ;(async () => {
    const mtime = new Date()
    for await (const file of files) {
      const body = Buffer.from(file.text, 'utf8')
      await new Promise<void>((resolve, reject) => {
        archive.entry({ name: file.name, size: body.length, mode: 0o644, mtime }, body, (err) =>
          err ? reject(err) : resolve(),
        )
      })
    }
    archive.finalize()
  })().catch((err: unknown) => archive.destroy(err as Error))
  archive.on('error', (err) => gzip.destroy(err))
  return archive.pipe(gzip)
}
