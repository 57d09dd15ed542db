import { describe, expect, it } from 'vitest'
import { csvCell, csvLine } from './audit.ts'

describe('audit CSV', () => {
  it('quotes cells a spreadsheet would run as a formula', () => {
    expect(csvCell('=cmd|" /C calc"!A0')).toBe(`"'=cmd|"" /C calc""!A0"`)
    for (const bad of ['+1', '-1', '@SUM(A1)', '\tx', '\rx']) expect(csvCell(bad).startsWith(`"'`)).toBe(true)
    expect(csvCell('plain')).toBe('plain')
    expect(csvCell('a,b')).toBe('"a,b"')
    expect(csvCell('say "hi"')).toBe('"say ""hi"""')
  })

  it('writes one line per entry with every field', () => {
    const line = csvLine({
      id: 'a'.repeat(24),
      at: '2026-01-01T00:00:00.000Z',
      organizationId: 'b'.repeat(24),
      actor: { type: 'user', id: 'u1', name: 'Ada' },
      action: 'prompt.created',
      resource: { type: 'prompt', id: 'p1' },
      requestId: 'r1',
      ip: '127.0.0.1',
      summary: '=cmd',
    })
    expect(line).toBe(
      `${'a'.repeat(24)},2026-01-01T00:00:00.000Z,${'b'.repeat(24)},user,u1,Ada,prompt.created,prompt,p1,r1,127.0.0.1,"'=cmd"\r\n`,
    )
  })
})
