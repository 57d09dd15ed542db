import { Readable } from 'node:stream'
import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { CsvFormatError, type CsvRow, parsePromptCsv, splitTags, validatePromptCsv } from './csv.ts'

const limits = { maxRows: 1000, maxBytes: 10 * 1024 * 1024 }

/** Feeds the text in small chunks so records, BOMs and multi-byte characters straddle them. */
async function* chunks(text: string | Buffer, size = 7): AsyncGenerator<Buffer> {
  const buf = typeof text === 'string' ? Buffer.from(text) : text
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size)
}

async function collect(text: string | Buffer, opts = limits, size = 7): Promise<CsvRow[]> {
  const rows: CsvRow[] = []
  for await (const row of parsePromptCsv(chunks(text, size), opts)) rows.push(row)
  return rows
}

async function formatError(p: Promise<unknown>): Promise<CsvFormatError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  if (!(err instanceof CsvFormatError)) throw new Error(`expected a CsvFormatError, got ${String(err)}`)
  return err
}

describe('parsePromptCsv', () => {
  it('reads chat prompts (type, messages) and config as JSON columns, reporting bad ones by row', async () => {
    const raw = (text: string) => `"${text.replaceAll('"', '""')}"`
    const cell = (v: unknown) => raw(JSON.stringify(v))
    const messages = [
      { role: 'system', content: 'You are {{persona}}' },
      { type: 'placeholder', name: 'history' },
    ]
    const csv = [
      'name,type,template,messages,config',
      `Chat,chat,,${cell(messages)},${cell({ model: 'm', temperature: 0.3 })}`,
      `Text,,Hi {{a}},,${cell({ model: 'x' })}`,
      `Bad role,chat,,${cell([{ role: 'wizard', content: 'x' }])},`,
      'No messages,chat,,,',
      `Empty list,chat,,${cell([])},`,
      `Too many,chat,,${cell(Array.from({ length: 101 }, () => ({ role: 'user', content: 'x' })))},`,
      `Config list,text,Hi,,${cell([1, 2])}`,
      'Config junk,text,Hi,,{nope',
      `Both,chat,Hi,${cell(messages)},`,
      'Odd type,image,Hi,,',
      // As the JSON API refuses them (issue: the stored prompt could not be saved back).
      `Proto,text,Hi,,${raw('{"__proto__":{"polluted":true}}')}`,
      `Constructor,text,Hi,,${raw('{"constructor":{"prototype":{"polluted":true}}}')}`,
      `Proto message,chat,,${raw('[{"role":"user","content":"x","__proto__":{"a":1}}]')},`,
    ].join('\n')
    expect(await collect(csv)).toEqual([
      {
        row: 2,
        ok: true,
        value: {
          name: 'Chat',
          type: 'chat',
          messages,
          description: '',
          tags: [],
          config: { model: 'm', temperature: 0.3 },
        },
      },
      {
        row: 3,
        ok: true,
        value: {
          name: 'Text',
          type: 'text',
          template: 'Hi {{a}}',
          description: '',
          tags: [],
          config: { model: 'x' },
        },
      },
      { row: 4, ok: false, message: expect.stringMatching(/^messages must be \{role, content\}/) },
      { row: 5, ok: false, message: 'messages are required for a chat prompt' },
      { row: 6, ok: false, message: 'messages must be a JSON list of at least one message' },
      { row: 7, ok: false, message: 'more than 100 messages' },
      { row: 8, ok: false, message: 'config must be a JSON object' },
      { row: 9, ok: false, message: 'config is not valid JSON' },
      { row: 10, ok: false, message: 'template is derived for chat prompts: leave it empty' },
      { row: 11, ok: false, message: 'type must be text or chat' },
      { row: 12, ok: false, message: 'config is not valid JSON' },
      { row: 13, ok: false, message: 'config is not valid JSON' },
      { row: 14, ok: false, message: 'messages is not valid JSON' },
    ])
    // A file of chat prompts needs no template column.
    expect(await collect(`name,type,messages\nC,chat,${cell(messages)}`)).toMatchObject([{ ok: true }])
  })

  it('reads a good file: any column order, header case and spacing, optional columns, extra columns', async () => {
    const csv = [
      ' Template ,NAME,Notes,tags , description',
      'Hello {{name}},Greeter,ignored,"greet; intro, greet , ;",Says hello',
      '"Line one, with comma\nLine two ""quoted""",  Two lines  ,x,,',
    ].join('\n')
    expect(await collect(csv)).toEqual([
      {
        row: 2,
        ok: true,
        value: {
          name: 'Greeter',
          type: 'text',
          template: 'Hello {{name}}',
          description: 'Says hello',
          tags: ['greet', 'intro'],
        },
      },
      {
        row: 3,
        ok: true,
        value: {
          name: 'Two lines',
          type: 'text',
          template: 'Line one, with comma\nLine two "quoted"',
          description: '',
          tags: [],
        },
      },
    ])
  })

  it('needs only name and template', async () => {
    const rows = await collect('name,template\r\nA,tpl\r\n')
    expect(rows).toEqual([
      { row: 2, ok: true, value: { name: 'A', type: 'text', template: 'tpl', description: '', tags: [] } },
    ])
  })

  it('handles multi-byte UTF-8 split across chunks', async () => {
    const rows = await collect('name,template\nÉtude ☃ 日本,Grüße 🚀\n', limits, 1)
    expect(rows[0]).toMatchObject({ ok: true, value: { name: 'Étude ☃ 日本', template: 'Grüße 🚀' } })
  })

  it('parses a 10,000-row file with the right row numbers', async () => {
    const lines = ['name,template,description,tags']
    for (let i = 1; i <= 10_000; i++)
      lines.push(`Prompt ${i},"Hello {{user}}, this is #${i}",Description ${i},a;b`)
    const rows = await collect(lines.join('\n'), { maxRows: 10_000, maxBytes: limits.maxBytes }, 64 * 1024)
    expect(rows).toHaveLength(10_000)
    expect(rows.every((r) => r.ok)).toBe(true)
    expect(rows[0]).toMatchObject({ row: 2, value: { name: 'Prompt 1' } })
    expect(rows[9999]).toEqual({
      row: 10_001,
      ok: true,
      value: {
        name: 'Prompt 10000',
        type: 'text',
        template: 'Hello {{user}}, this is #10000',
        description: 'Description 10000',
        tags: ['a', 'b'],
      },
    })
  })

  it('strips a UTF-8 byte order mark, even one split across chunks', async () => {
    const csv = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('name,template\nA,B\n')])
    for (const size of [1, 2, 1024]) {
      expect(await collect(csv, limits, size)).toEqual([
        { row: 2, ok: true, value: { name: 'A', type: 'text', template: 'B', description: '', tags: [] } },
      ])
    }
  })

  it('numbers rows as a spreadsheet does when quoted fields span lines', async () => {
    const csv = [
      'name,template',
      'first,"line 1',
      'line 2',
      '',
      'line 4 after an empty line inside the quotes"',
      'second,one line',
      '',
      'third,"a',
      'b"',
      'fourth,x',
    ].join('\r\n')
    const rows = await collect(csv)
    // The blank line between "second" and "third" is a row of its own in a spreadsheet.
    expect(rows.map((r) => [r.row, r.ok && r.value.name])).toEqual([
      [2, 'first'],
      [3, 'second'],
      [5, 'third'],
      [6, 'fourth'],
    ])
    expect(rows[0]).toMatchObject({
      value: { template: 'line 1\r\nline 2\r\n\r\nline 4 after an empty line inside the quotes' },
    })
  })

  it('skips rows whose every cell is blank but keeps counting them', async () => {
    const rows = await collect('name,template,tags\nA,a,\n,,\n  , ,\nB,b,\n\n')
    expect(rows.map((r) => r.row)).toEqual([2, 5])
  })

  it('refuses a file missing required columns before yielding anything', async () => {
    const it1 = parsePromptCsv(chunks('title,body\nA,B\n'), limits)
    const err = await formatError(it1.next())
    expect(err.code).toBe('VALIDATION_ERROR')
    expect(err.message).toContain('name')
    expect(err.message).toContain('template')

    const err2 = await formatError(collect('Name,description\nA,B\n'))
    expect(err2.message).toMatch(/missing required column: template$/)
    expect(err2.message).not.toMatch(/\bname\b/)
  })

  it('refuses a duplicated column', async () => {
    const err = await formatError(collect('name,template,Name\nA,B,C\n'))
    expect(err.code).toBe('VALIDATION_ERROR')
    expect(err.message).toContain('duplicate column: name')
  })

  it('refuses an empty file', async () => {
    const err = await formatError(collect(''))
    expect(err.code).toBe('VALIDATION_ERROR')
    expect(err.message).toContain('header')
  })

  it('accepts a header with no rows', async () => {
    expect(await collect('name,template\n')).toEqual([])
  })

  it('reports an unclosed quote with its row and line', async () => {
    const csv = 'name,template\nA,ok\nB,"never closed\nand more\n'
    const err = await formatError(collect(csv))
    expect(err.code).toBe('VALIDATION_ERROR')
    expect(err.message).toMatch(/^malformed CSV at row 3: Quote Not Closed/)
    expect(err.message).toContain('line')
    expect(err.row).toBe(3)
    expect(err.line).toEqual(expect.any(Number))
  })

  it('reports an inconsistent column count with its row and line', async () => {
    const csv = 'name,template\nA,"two\nlines"\nB,b,extra\n'
    const err = await formatError(collect(csv))
    expect(err.message).toMatch(/^malformed CSV at row 3: .*line 4/)
    expect(err).toMatchObject({ row: 3, line: 4, code: 'VALIDATION_ERROR' })
  })

  it('reports text after a closing quote', async () => {
    const err = await formatError(collect('name,template\n"A"x,b\n'))
    expect(err.message).toMatch(/^malformed CSV at row 2/)
  })

  it('may yield rows before a malformed one while streaming, which validatePromptCsv prevents', async () => {
    // csv-parse holds back the last few bytes of a chunk, so the bad record starts in the first.
    const good = 'name,template\nA,a\nB,b\nC,"an opening quote that is never'
    const bad = ' closed\n'
    let sawGoodRows: () => void = () => {}
    const gate = new Promise<void>((resolve) => {
      sawGoodRows = resolve
    })
    // The malformed tail arrives only after the consumer has the good rows, as with a slow upload.
    async function* slowUpload(): AsyncGenerator<Buffer> {
      yield Buffer.from(good)
      await gate
      yield Buffer.from(bad)
    }
    const seen: number[] = []
    const err = await formatError(
      (async () => {
        for await (const r of parsePromptCsv(slowUpload(), limits)) {
          seen.push(r.row)
          if (seen.length === 2) sawGoodRows()
        }
      })(),
    )
    expect(seen).toEqual([2, 3])
    expect(err.row).toBe(4)
    await expect(validatePromptCsv(Buffer.from(good + bad), limits)).rejects.toBeInstanceOf(CsvFormatError)
  })

  it('refuses more than maxRows data rows', async () => {
    const opts = { maxRows: 3, maxBytes: limits.maxBytes }
    const ok = 'name,template\nA,a\nB,b\n\n,\nC,c\n'
    expect(await collect(ok, opts)).toHaveLength(3)
    const err = await formatError(collect(`${ok}D,d\n`, opts))
    expect(err.code).toBe('VALIDATION_ERROR')
    expect(err.message).toMatch(/^too many rows/)
    await expect(validatePromptCsv(Buffer.from(`${ok}D,d\n`), opts)).rejects.toThrow(/too many rows/)
  })

  it('refuses more than maxBytes without reading the rest of the stream', async () => {
    let served = 0
    async function* endless(): AsyncGenerator<Buffer> {
      yield Buffer.from('name,template\n')
      for (;;) {
        served++
        yield Buffer.from('A,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n')
      }
    }
    const opts = { maxRows: 1_000_000, maxBytes: 1000 }
    const err = await formatError(
      (async () => {
        for await (const _ of parsePromptCsv(endless(), opts));
      })(),
    )
    expect(err.code).toBe('PAYLOAD_TOO_LARGE')
    expect(err.statusCode).toBe(413)
    expect(served).toBeLessThan(100)
  })

  it('accepts a file of exactly maxBytes', async () => {
    const csv = 'name,template\nA,a\n'
    const opts = { maxRows: 10, maxBytes: Buffer.byteLength(csv) }
    expect(await collect(csv, opts)).toHaveLength(1)
    const err = await formatError(collect(csv, { ...opts, maxBytes: opts.maxBytes - 1 }))
    expect(err.code).toBe('PAYLOAD_TOO_LARGE')
  })

  it('yields a row error for a blank name or template and carries on', async () => {
    const csv = 'name,template,description\n   ,tpl,\nA,"  ",\n,\t,only a description\nB,b,\n'
    expect(await collect(csv)).toEqual([
      { row: 2, ok: false, message: 'name is required' },
      { row: 3, ok: false, message: 'template is required' },
      { row: 4, ok: false, message: 'name is required; template is required' },
      { row: 5, ok: true, value: { name: 'B', type: 'text', template: 'b', description: '', tags: [] } },
    ])
  })

  it('yields a row error for a name or tag with control characters, as the create route refuses them', async () => {
    const csv = 'name,template,tags\n"a\u0007b",t,\n"multi\nline",t,\nok,t,"x;y\u0000"\nfine,t,"x; y"\n'
    expect((await collect(csv)).map((r) => (r.ok ? r.value.tags : r.message))).toEqual([
      'name has control characters',
      'name has control characters',
      'a tag has control characters',
      ['x', 'y'],
    ])
  })

  it('yields a row error for text with control characters (tab and line breaks are text)', async () => {
    const csv =
      'name,template,description\na,"hi\u0000",\nb,t,"note\u001b[0m"\nc,"line\r\n\tindented","two\nlines"\n'
    expect((await collect(csv)).map((r) => (r.ok ? r.value.template : r.message))).toEqual([
      'template has control characters',
      'description has control characters',
      'line\r\n\tindented',
    ])
  })

  it('yields a row error for an over-long name, template, description or tags', async () => {
    const long = 'x'.repeat(130_000) // also past csv-parse's default record size limit
    const rows = await collect(
      [
        'name,template,description,tags',
        `${'n'.repeat(201)},t,,`,
        `ok,${'t'.repeat(100_000)},,`,
        `big,${long},,`,
        `desc,t,${'d'.repeat(2001)},`,
        `tags,t,,${Array.from({ length: 51 }, (_, i) => `t${i}`).join(';')}`,
        `tag,t,,${'g'.repeat(51)}`,
      ].join('\n'),
      limits,
      64 * 1024,
    )
    expect(rows.map((r) => (r.ok ? 'ok' : r.message))).toEqual([
      'name is longer than 200 characters',
      'ok',
      'template is longer than 100000 characters',
      'description is longer than 2000 characters',
      'more than 50 tags',
      expect.stringMatching(/^tag "g+…" is longer than 50 characters$/),
    ])
    expect(rows.map((r) => r.row)).toEqual([2, 3, 4, 5, 6, 7])
  })

  it('accepts a Node readable stream, including string chunks', async () => {
    const rows: CsvRow[] = []
    for await (const r of parsePromptCsv(Readable.from(['name,temp', 'late\nA,', 'b\n']), limits))
      rows.push(r)
    expect(rows).toEqual([
      { row: 2, ok: true, value: { name: 'A', type: 'text', template: 'b', description: '', tags: [] } },
    ])
  })

  it('stops reading the input when the consumer stops early', async () => {
    const source = Readable.from(chunks(`name,template\n${'A,a\n'.repeat(10_000)}`, 16))
    for await (const _ of parsePromptCsv(source, limits)) break
    await new Promise((resolve) => setImmediate(resolve))
    expect(source.destroyed).toBe(true)
  })

  it('passes a failure of the input through unchanged', async () => {
    async function* failing(): AsyncGenerator<Buffer> {
      yield Buffer.from('name,template\nA,a\n')
      throw new Error('connection reset')
    }
    await expect(
      (async () => {
        for await (const _ of parsePromptCsv(failing(), limits));
      })(),
    ).rejects.toThrow('connection reset')
  })
})

describe('validatePromptCsv', () => {
  it('returns every row, good and bad', async () => {
    const { rows } = await validatePromptCsv(Buffer.from('name,template,tags\nA,a,x\n,b,\n'), limits)
    expect(rows).toEqual([
      { row: 2, ok: true, value: { name: 'A', type: 'text', template: 'a', description: '', tags: ['x'] } },
      { row: 3, ok: false, message: 'name is required' },
    ])
  })

  it('refuses an oversized buffer without parsing it', async () => {
    const err = await formatError(
      validatePromptCsv(Buffer.from('not even csv "'), { maxRows: 1, maxBytes: 5 }),
    )
    expect(err.code).toBe('PAYLOAD_TOO_LARGE')
  })

  it('refuses a missing column', async () => {
    const err = await formatError(validatePromptCsv(Buffer.from('name\nA\n'), limits))
    expect(err.message).toBe('missing required column: template')
  })
})

describe('CsvFormatError', () => {
  it('is an AppError the error handler renders with the right status', () => {
    const e = new CsvFormatError('bad')
    expect(e).toBeInstanceOf(AppError)
    expect(e).toMatchObject({ name: 'CsvFormatError', code: 'VALIDATION_ERROR', statusCode: 400 })
    expect(new CsvFormatError('big', 'PAYLOAD_TOO_LARGE').statusCode).toBe(413)
    expect(new CsvFormatError('at', 'VALIDATION_ERROR', { row: 3, line: 5 }).details).toEqual({
      row: 3,
      line: 5,
    })
  })
})

describe('splitTags', () => {
  it('splits on ; and , trims, drops empties and dedupes in order', () => {
    expect(splitTags(' a ;b,, c;a ; ;B ')).toEqual(['a', 'b', 'c', 'B'])
    expect(splitTags('')).toEqual([])
  })
})
