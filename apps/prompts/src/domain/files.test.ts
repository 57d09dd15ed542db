import { readFileSync } from 'node:fs'
import { FILE_FORMATS } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { type ExportSource, exportFile, type FilePrompt, parsePromptFile, toDotprompt } from './files.ts'

const fixture = (name: string) => readFileSync(new URL(`../../test/fixtures/${name}`, import.meta.url))
const bytes = (text: string) => Buffer.from(text, 'utf8')

function parseOne(name: string, content: Uint8Array): FilePrompt {
  const [first, ...rest] = parsePromptFile(name, content)
  expect(rest).toEqual([])
  if (!first?.ok) throw new Error(`expected a prompt, got ${JSON.stringify(first)}`)
  return first.prompt
}

function failure(name: string, content: Uint8Array): string {
  const [first] = parsePromptFile(name, content)
  if (!first || first.ok) throw new Error(`expected an error, got ${JSON.stringify(first)}`)
  return first.message
}

const chat: ExportSource = {
  slug: 'support-bot',
  name: 'Support bot',
  description: 'Answers: politely, "always"',
  tags: ['support', 'chat'],
  type: 'chat',
  template: '(derived)',
  messages: [
    { role: 'system', content: 'You are {{persona}}.\n{{#if vip}}Be extra kind.{{/if}}\n' },
    { type: 'placeholder', name: 'history' },
    { type: 'placeholder', name: 'examples' },
    { role: 'user', content: '{{> shared-footer}}\n{{question}}' },
    { role: 'assistant', content: '' },
  ],
  variables: [
    { name: 'persona', required: false, description: 'who, exactly', defaultValue: 'a librarian' },
    { name: 'vip', required: false },
    { name: 'history', required: true, description: 'the chat so far' },
    { name: 'examples', required: true },
    { name: 'question', required: true, defaultValue: 'why?' },
  ],
  config: { model: 'gpt-4o-mini', temperature: 0.2, response_format: { type: 'json_object' }, tools: [] },
  version: null,
  versionId: null,
}

const text: ExportSource = {
  slug: 'summary',
  name: 'Summary',
  description: '',
  tags: [],
  type: 'text',
  template: '---\nSummarize {{ text }} in {{words}} words.\n\n  user:\n{{role "system"}}\n',
  variables: [
    { name: 'text', required: true },
    { name: 'words', required: false, defaultValue: '50' },
  ],
  version: 3,
  versionId: '0123456789abcdef01234567',
}

describe('prompt files', () => {
  for (const format of FILE_FORMATS) {
    it(`reads back what it writes (${format})`, () => {
      const ext = { dotprompt: 'x.prompt', prompty: 'x.prompty', json: 'x.json' }[format]
      for (const src of [chat, text]) {
        const back = parseOne(ext, bytes(exportFile(src, format)))
        expect(back.slug).toBe(src.slug)
        expect(back.name).toBe(src.name)
        expect(back.description).toBe(src.description)
        expect(back.tags).toEqual(src.tags)
        expect(back.type).toBe(src.type)
        if (src.type === 'chat') expect(back.messages).toEqual(src.messages)
        else expect(back.template).toBe(src.template)
        expect(back.variables).toEqual(src.variables)
        expect(back.config).toEqual(src.config)
      }
    })
  }

  it('writes Dotprompt as section 16 maps it', () => {
    const out = toDotprompt(chat)
    expect(out).toContain('model: gpt-4o-mini\n')
    expect(out).toContain('persona?: string, who, exactly')
    expect(out).toContain('{{role "system"}}\nYou are {{persona}}.')
    expect(out).toContain('\n{{history}}\n{{! placeholder examples }}\n')
    expect(out).toContain('  prompt:\n    slug: support-bot')
  })

  it('imports a Dotprompt file written by hand', () => {
    const p = parseOne('recipe.prompt', fixture('recipe.prompt'))
    expect(p).toMatchObject({ slug: 'recipe', name: 'recipe', type: 'chat' })
    expect(p.messages).toEqual([
      { role: 'system', content: 'You are a chef who cooks {{cuisine}} food.' },
      { role: 'user', content: 'Give me a recipe for {{food}} for {{servings}} people.' },
    ])
    expect(p.variables).toEqual([
      { name: 'food', required: true, description: 'the dish to cook' },
      { name: 'cuisine', required: false, defaultValue: 'Italian' },
      { name: 'servings', required: false, description: 'how many people' },
    ])
    expect(p.config).toEqual({
      temperature: 0.9,
      maxOutputTokens: 400,
      output: { format: 'json', schema: { title: 'string', 'steps(array)': 'string' } },
      model: 'googleai/gemini-1.5-flash',
    })
  })

  it('imports a Prompty file written by hand', () => {
    const p = parseOne('weather.prompty', fixture('weather.prompty'))
    expect(p).toMatchObject({
      slug: 'weather',
      name: 'Weather Report',
      description: 'A short weather report',
    })
    expect(p.messages).toEqual([
      { role: 'system', content: 'You are a weather reporter. Use {{units}} units.\n' },
      { role: 'user', content: 'What is the weather in {{city}}?' },
    ])
    expect(p.variables).toEqual([
      { name: 'city', required: true, description: 'the city' },
      { name: 'units', required: false, defaultValue: 'metric' },
    ])
    // Connection settings (endpoints, secrets) are not config.
    expect(p.config).toEqual({ max_tokens: 300, temperature: 0.3, model: 'gpt-4o' })
  })

  it('reads a Langfuse array, mapping its labels', () => {
    const out = parsePromptFile(
      'langfuse.json',
      bytes(
        JSON.stringify([
          {
            name: 'movie-critic',
            type: 'text',
            prompt: 'Rate {{movie}}',
            config: { model: 'x' },
            labels: ['production', 'latest'],
            tags: ['a'],
          },
          {
            name: 'chat/helper',
            type: 'chat',
            prompt: [
              { role: 'system', content: 'Hi {{name}}' },
              { type: 'placeholder', name: 'history' },
            ],
            labels: ['staging'],
          },
          { name: 'broken', type: 'chat', prompt: 'not a list' },
        ]),
      ),
    )
    expect(out.map((p) => (p.ok ? p.prompt.slug : p.message))).toEqual([
      'movie-critic',
      'chat-helper',
      'prompt (a list of messages) is required for a chat prompt',
    ])
    expect(out[0]?.ok && out[0].prompt.pin).toEqual(['production'])
    expect(out[1]?.ok && out[1].prompt.pin).toEqual(['preview'])
  })

  it('keeps variable descriptions as written: spaces, empty, several lines (Dotprompt and Prompty)', () => {
    const src: ExportSource = {
      ...chat,
      variables: [
        { name: 'persona', required: false, description: '  padded, with a comma  ' },
        { name: 'vip', required: true, description: '' },
        { name: 'history', required: true, description: 'the chat\nso far (two lines)' },
        { name: 'examples', required: false, description: '' },
        { name: 'question', required: true, description: 'first line\nsecond line' },
      ],
    }
    for (const name of ['x.prompt', 'x.prompty']) {
      const format = name.endsWith('.prompt') ? 'dotprompt' : 'prompty'
      expect(parseOne(name, bytes(exportFile(src, format))).variables, name).toEqual(src.variables)
    }
  })

  it('reads a placeholder description over several lines in a Picoschema key', () => {
    const p = parseOne(
      'x.prompt',
      bytes('---\ninput:\n  schema:\n    "history(array, the chat\\nso far)": object\n---\n{{history}}\n'),
    )
    expect(p.variables).toEqual([{ name: 'history', required: true, description: 'the chat\nso far' }])
  })

  it('keeps large floats (1e300) and refuses only integers written beyond 2^53', () => {
    const big: ExportSource = {
      ...text,
      config: { a: 1e300, b: -2.5e-300, c: 1.7976931348623157e308, d: 42 },
    }
    for (const format of FILE_FORMATS) {
      const ext = { dotprompt: 'x.prompt', prompty: 'x.prompty', json: 'x.json' }[format]
      expect(parseOne(ext, bytes(exportFile(big, format))).config, format).toEqual(big.config)
    }
    expect(
      parseOne('a.json', bytes('{"name":"x","template":"a","config":{"n":1E300,"m":9007199254740991}}'))
        .config,
    ).toEqual({
      n: 1e300,
      m: 9007199254740991,
    })
    expect(failure('a.json', bytes('{"name":"x","template":"a","config":{"n":9007199254740993}}'))).toMatch(
      /too large to keep exactly/,
    )
    expect(failure('a.prompt', bytes('---\nconfig:\n  n: 9007199254740993\n---\nhi'))).toMatch(
      /too large to keep exactly/,
    )
    expect(parseOne('a.prompt', bytes('---\nconfig:\n  n: 1e300\n  m: 0x10\n---\nhi')).config).toEqual({
      n: 1e300,
      m: 16,
    })
  })

  it('refuses pathologically nested files without a stack overflow', () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`
    expect(failure('a.json', bytes(`{"name":"x","template":"a","config":{"a":${deep(100)}}}`))).toMatch(
      /nested more than 64/,
    )
    expect(failure('a.json', bytes(deep(200_000)))).toMatch(/nested/)
    expect(failure('a.prompt', bytes(`---\nconfig:\n  a: ${deep(100_000)}\n---\nhi`))).toMatch(/nested|YAML/)
  })

  it('refuses a key containing U+0000 (written as an escape), in JSON and YAML alike', () => {
    expect(failure('a.json', bytes('{"name":"x","template":"a","config":{"a\\u0000":1}}'))).toMatch(/U\+0000/)
    expect(failure('a.prompt', bytes('---\nconfig:\n  "a\\0": 1\n---\nhi'))).toMatch(/U\+0000/)
    expect(failure('a.prompty', bytes('---\nname: x\nmodel:\n  parameters:\n    "\\0": 1\n---\nhi'))).toMatch(
      /U\+0000/,
    )
  })

  it('refuses bad files with a message', () => {
    expect(failure('a.prompt', bytes('---\nmodel: [unclosed\n---\nhi'))).toMatch(/not valid YAML/)
    expect(failure('a.prompt', bytes('---\n- a\n- b\n---\nhi'))).toMatch(/not an object/)
    expect(failure('a.prompt', bytes('---\nmodel: x\nhi'))).toMatch(/no closing/)
    expect(failure('a.prompt', Buffer.alloc(2 * 1024 * 1024, 'a'))).toMatch(/larger than/)
    expect(failure('a.prompt', bytes('hello\u0000world'))).toMatch(/control character/)
    expect(failure('a.prompt', Buffer.from([0xff, 0xfe, 0x00]))).toMatch(/UTF-8/)
    expect(failure('a.prompt', bytes('---\nconfig:\n  n: 1e999\n---\nhi'))).toMatch(/too large/)
    expect(
      failure('a.json', bytes('{"name":"x","template":"a","config":{"n":123456789012345678901234567890}}')),
    ).toMatch(/too large/)
    expect(failure('a.json', bytes('{"name": "x", "template": "a", "evil": 1}'))).toMatch(/unknown field/)
    expect(failure('a.json', bytes('{nope'))).toMatch(/not valid JSON/)
    // The routes' name rule, said in words (a line separator is no C0 control: the file passes
    // the text check, then the name rule).
    expect(failure('a.json', bytes('{"name":"a\u2028b","template":"a"}'))).toBe(
      'name: must not be blank, and must hold no control characters or line breaks',
    )
    expect(failure('a.json', bytes('{"name":"x","template":"a","tags":["t\u0085"]}'))).toBe(
      'tags.0: must not be blank, and must hold no control characters or line breaks',
    )
    expect(failure('a.txt', bytes('hi'))).toMatch(/unknown file type/)
    expect(failure('a.prompt', bytes('---\nmetadata:\n  prompt:\n    slug: Not A Slug\n---\nhi'))).toMatch(
      /slug/,
    )
    expect(
      failure(
        'a.prompt',
        bytes(
          '---\na: &a [1]\nb: [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n---\nhi',
        ),
      ),
    ).toMatch(/YAML/)
  })
})
