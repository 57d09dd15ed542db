import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs'

/**
 * Files at rest: DATA_DIR and what is in it (stores, key file, holder files) are readable by
 * the service's user only, whatever the process umask (PostgreSQL refuses group- or
 * world-readable data directories for the same reason). Modes are set with chmod after
 * creation, because `mode` at creation is filtered by the umask.
 */

/**
 * Creates `dir` (and its parents) and makes it 0700, whatever the umask. A shared folder with
 * the sticky bit (such as /tmp, given as DATA_DIR by mistake) is left as it is: it is not this
 * service's to close, and the files in it are still made 0600.
 */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  if ((statSync(dir).mode & 0o1000) !== 0) return
  chmodSync(dir, 0o700)
}

/**
 * Creates `file` empty with mode 0600 unless it exists, and makes it 0600 either way. SQLite
 * creates a database 0644 (SQLITE_DEFAULT_FILE_PERMISSIONS, set with fchmod past the umask)
 * and gives its -wal and -shm the database file's mode: a database that is already 0600 when
 * SQLite opens it keeps all three private.
 */
export function ensurePrivateFile(file: string): void {
  closeSync(openSync(file, 'a', 0o600))
  chmodSync(file, 0o600)
}
