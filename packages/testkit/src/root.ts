import { fileURLToPath } from 'node:url'

/** The repository's root folder. */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url))
