import type { ChatMessage } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { asMessageList, chatLogic, chatTemplate, chatVariableNames, compileChat, renderChat } from './chat.ts'
import { compileLogic } from './logic.ts'

const messages: ChatMessage[] = [
  { role: 'system', content: 'You are {{persona}}.' },
  { type: 'placeholder', name: 'history' },
  { role: 'user', content: '{{ question }} {{persona}}' },
]

describe('chat prompts', () => {
  it('derives the template and the variables, placeholders among them', () => {
    expect(chatTemplate(messages)).toBe(
      '[system]\nYou are {{persona}}.\n\n[placeholder history]\n\n[user]\n{{ question }} {{persona}}',
    )
    expect(chatVariableNames(messages)).toEqual({
      names: ['persona', 'history', 'question'],
      placeholders: ['history'],
    })
  })

  it('accepts only lists of {role, content} with a known role and text content', () => {
    expect(asMessageList([{ role: 'tool', content: 'x', extra: 1 }])).toEqual([
      { role: 'tool', content: 'x' },
    ])
    expect(asMessageList([])).toEqual([])
    for (const bad of [
      'x',
      null,
      {},
      [{ role: 'user' }],
      [{ role: 'root', content: 'x' }],
      [['user', 'x']],
    ]) {
      expect(asMessageList(bad), JSON.stringify(bad)).toBeNull()
    }
  })

  it('renders with defaults and reports missing, unresolved and invalid placeholders', () => {
    const chat = compileChat(messages)
    const variables = [
      { name: 'persona', required: false, defaultValue: 'kind' },
      { name: 'history', required: true },
      { name: 'question', required: true },
    ]
    const ok = renderChat(
      chat,
      variables,
      { history: [{ role: 'assistant', content: 'Hi' }], question: 3 },
      'invoke',
    )
    expect(ok.renderedMessages).toEqual([
      { role: 'system', content: 'You are kind.' },
      { role: 'assistant', content: 'Hi' },
      { role: 'user', content: '3 kind' },
    ])
    expect(ok).toMatchObject({ missingRequired: [], unresolved: [], invalidPlaceholders: [] })
    const bad = renderChat(chat, variables, { history: 'nope' }, 'invoke')
    expect(bad).toMatchObject({ missingRequired: ['question'], invalidPlaceholders: ['history'] })
    expect(bad.renderedMessages.at(-1)).toEqual({ role: 'user', content: ' kind' })
    const preview = renderChat(chat, variables, {}, 'inject')
    expect(preview.unresolved).toEqual(['history', 'question'])
    expect(preview.renderedContent).toBe(
      '[system]\nYou are kind.\n\n[placeholder history]\n\n[user]\n{{ question }} kind',
    )
  })
})

describe('renderChat output size (issue 14, finding 2)', () => {
  const messages: ChatMessage[] = [
    { role: 'system', content: '{{x}}{{x}}' },
    { type: 'placeholder', name: 'history' },
  ]

  it('renders exactly up to the limit and refuses one byte more, counting spliced messages', () => {
    const values = { x: 'é'.repeat(5), history: [{ role: 'user', content: 'hi' }] }
    const rendered = renderChat(compileChat(messages), [], values, 'invoke')
    const size = new TextEncoder().encode(rendered.renderedContent).length
    expect(
      renderChat(compileChat(messages), [], values, 'invoke', { maxOutputBytes: size }).renderedContent,
    ).toBe(rendered.renderedContent)
    expect(() =>
      renderChat(compileChat(messages), [], values, 'invoke', { maxOutputBytes: size - 1 }),
    ).toThrow(expect.objectContaining({ code: 'RENDER_TOO_LARGE' }))
  })
})

describe('logic and references in chat messages (DESIGN section 12)', () => {
  const withLogic: ChatMessage[] = [
    { role: 'system', content: '{{> policy}} {{#if vip}}Priority.{{else}}Standard.{{/if}}' },
    { type: 'placeholder', name: 'history' },
    { role: 'user', content: '{{#each items}}{{@index}}={{this.name}} {{/each}}{{question}}' },
    { role: 'assistant', content: 'plain {{question}}' },
  ]

  it('detects block operands as variables, each message on its own', () => {
    expect(chatVariableNames(withLogic).names).toEqual(['vip', 'history', 'items', 'question'])
    const chat = compileChat(withLogic)
    expect(chatLogic(chat).map((l) => l.includes.map((r) => r.key))).toEqual([['policy'], []])
    // A message without logic keeps the flat path (no logic parsed for it).
    expect(chat[3]).not.toHaveProperty('logic')
  })

  it('renders blocks and includes per message and says what it included', () => {
    const policy = compileLogic('Be kind to {{name}}.{{#if vip}}!{{/if}}')
    const out = renderChat(
      compileChat(withLogic),
      [],
      { vip: true, name: 'Ann', question: 'Q?', items: [{ name: 'a' }, { name: 'b' }], history: [] },
      'invoke',
      { include: (ref) => (ref.slug === 'policy' ? (policy ?? undefined) : undefined) },
    )
    expect(out.renderedMessages).toEqual([
      { role: 'system', content: 'Be kind to Ann.! Priority.' },
      { role: 'user', content: '0=a 1=b Q?' },
      { role: 'assistant', content: 'plain Q?' },
    ])
    expect(out.included).toEqual(['policy'])
    expect(out.renderedContent).toBe(
      '[system]\nBe kind to Ann.! Priority.\n\n[user]\n0=a 1=b Q?\n\n[assistant]\nplain Q?',
    )
  })

  it('inject keeps unresolved names and an unresolvable reference as written', () => {
    const out = renderChat(compileChat(withLogic), [], { items: [] }, 'inject')
    expect(out.renderedMessages[0]).toEqual({ role: 'system', content: '{{> policy}} Standard.' })
    expect(out.unresolved).toEqual(['vip', 'history', 'question'])
    expect(out.included).toEqual([])
  })

  it('a loop over a non-array is a VALIDATION_ERROR; the output cap counts every message', () => {
    const chat = compileChat(withLogic)
    expect(() => renderChat(chat, [], { items: 'x', question: '' }, 'invoke')).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR' }),
    )
    const values = { items: [{ name: 'é' }], question: 'q', history: [] }
    const size = new TextEncoder().encode(renderChat(chat, [], values, 'invoke').renderedContent).length
    expect(renderChat(chat, [], values, 'invoke', { maxOutputBytes: size }).renderedContent).toHaveLength(
      renderChat(chat, [], values, 'invoke').renderedContent.length,
    )
    expect(() => renderChat(chat, [], values, 'invoke', { maxOutputBytes: size - 1 })).toThrow(
      expect.objectContaining({ code: 'RENDER_TOO_LARGE' }),
    )
    // A loop expanding past the cap stops there (the whole text is never built).
    const big = { items: Array.from({ length: 100_000 }, () => ({ name: 'x'.repeat(100) })), question: '' }
    expect(() => renderChat(chat, [], big, 'invoke', { maxOutputBytes: 1_000_000 })).toThrow(
      expect.objectContaining({ code: 'RENDER_TOO_LARGE', details: { maxOutputBytes: 1_000_000 } }),
    )
  })

  it('the evaluation bound is shared by all messages', () => {
    const loops: ChatMessage[] = [
      { role: 'user', content: '{{#each xs}}{{#each xs}}{{/each}}{{/each}}' },
      { role: 'user', content: '{{#each xs}}{{#each xs}}{{/each}}{{/each}}' },
    ]
    const xs = Array.from({ length: 30 }, () => 0)
    // One message alone fits in 1,000 steps; the two together do not.
    expect(() =>
      renderChat(compileChat(loops.slice(0, 1)), [], { xs }, 'invoke', { maxSteps: 1_000 }),
    ).not.toThrow()
    expect(() => renderChat(compileChat(loops), [], { xs }, 'invoke', { maxSteps: 1_000 })).toThrow(
      expect.objectContaining({ code: 'RENDER_TOO_LARGE' }),
    )
  })
})
