import type { ChatMessage } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { asMessageList, chatTemplate, chatVariableNames, compileChat, renderChat } from './chat.ts'

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
