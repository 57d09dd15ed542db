import { describe, expect, it } from 'vitest'
import { CSV_MAX_BYTES_LIMIT, loadPromptsConfig } from './config.ts'

const base = { INTERNAL_AUTH_SECRET: 's'.repeat(32) }

describe('CSV_MAX_BYTES', () => {
  it('defaults to 10 MiB and accepts up to the limit that fits one MongoDB document', () => {
    expect(loadPromptsConfig(base).CSV_MAX_BYTES).toBe(10 * 1024 * 1024)
    expect(loadPromptsConfig({ ...base, CSV_MAX_BYTES: String(CSV_MAX_BYTES_LIMIT) }).CSV_MAX_BYTES).toBe(
      CSV_MAX_BYTES_LIMIT,
    )
  })

  it('refuses a file limit the import_files document could not hold (BSON: 16 MiB)', () => {
    expect(() => loadPromptsConfig({ ...base, CSV_MAX_BYTES: String(16 * 1024 * 1024) })).toThrow(
      /CSV_MAX_BYTES/,
    )
  })
})
