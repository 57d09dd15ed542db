import type { Variable } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { DIFF_MAX_EDIT_LENGTH, diffVersions } from './diff.ts'

const labels = { from: 'v1', to: 'v2' }
const v = (name: string, extra: Partial<Variable> = {}): Variable => ({ name, required: true, ...extra })

describe('diffVersions', () => {
  it('reports nothing for identical inputs', () => {
    const side = { template: 'Hello {{name}}\nBye', variables: [v('name')] }
    expect(diffVersions(side, { ...side, variables: [v('name')] }, labels)).toEqual({
      from: 'v1',
      to: 'v2',
      template: { hunks: [], added: 0, removed: 0 },
      variables: { added: [], removed: [], changed: [] },
      messages: { added: [], removed: [], changed: [] },
      config: { changed: false, before: null, after: null, hunks: [] },
    })
  })

  it('returns exactly the documented shape', () => {
    const d = diffVersions(
      { template: 'a\nb\nc', variables: [] },
      { template: 'a\nB\nc', variables: [] },
      labels,
    )
    expect(Object.keys(d).sort()).toEqual(['config', 'from', 'messages', 'template', 'to', 'variables'])
    expect(Object.keys(d.template).sort()).toEqual(['added', 'hunks', 'removed'])
    expect(Object.keys(d.variables).sort()).toEqual(['added', 'changed', 'removed'])
    expect(d.template.hunks).toHaveLength(1)
    expect(Object.keys(d.template.hunks[0] ?? {}).sort()).toEqual([
      'lines',
      'newLines',
      'newStart',
      'oldLines',
      'oldStart',
    ])
  })

  it('diffs a one-line change with its context', () => {
    const d = diffVersions(
      { template: 'a\nb\nc\n', variables: [] },
      { template: 'a\nB\nc\n', variables: [] },
      labels,
    )
    expect(d.template).toEqual({
      hunks: [{ oldStart: 1, oldLines: 3, newStart: 1, newLines: 3, lines: [' a', '-b', '+B', ' c'] }],
      added: 1,
      removed: 1,
    })
  })

  it('splits distant changes into separate hunks and counts every added and removed line', () => {
    const lines = Array.from({ length: 40 }, (_, i) => `line ${i + 1}`)
    const before = `${lines.join('\n')}\n`
    const changed = [...lines]
    changed[1] = 'LINE 2'
    changed.splice(20, 1) // remove line 21
    changed.splice(34, 0, 'new a', 'new b') // insert near the end
    const after = `${changed.join('\n')}\n`

    const d = diffVersions({ template: before, variables: [] }, { template: after, variables: [] }, labels)
    expect(d.template.hunks).toHaveLength(3)
    expect(d.template.added).toBe(3)
    expect(d.template.removed).toBe(2)
    const [first, second, third] = d.template.hunks
    expect(first).toMatchObject({ oldStart: 1, newStart: 1 })
    expect(first?.lines).toContain('-line 2')
    expect(first?.lines).toContain('+LINE 2')
    expect(second?.lines).toContain('-line 21')
    expect(second?.oldLines).toBe((second?.newLines ?? 0) + 1)
    expect(third?.lines.filter((l) => l.startsWith('+'))).toEqual(['+new a', '+new b'])
    // Hunk line counts agree with their lines (the no-newline marker counts for neither side).
    for (const h of d.template.hunks) {
      const oldCount = h.lines.filter((l) => l.startsWith(' ') || l.startsWith('-')).length
      const newCount = h.lines.filter((l) => l.startsWith(' ') || l.startsWith('+')).length
      expect([oldCount, newCount]).toEqual([h.oldLines, h.newLines])
    }
  })

  it('handles a template written from nothing and one emptied', () => {
    const created = diffVersions({ template: '', variables: [] }, { template: 'x\ny', variables: [] }, labels)
    expect(created.template.added).toBe(2)
    expect(created.template.removed).toBe(0)
    expect(created.template.hunks).toHaveLength(1)

    const emptied = diffVersions({ template: 'x\ny', variables: [] }, { template: '', variables: [] }, labels)
    expect(emptied.template.added).toBe(0)
    expect(emptied.template.removed).toBe(2)
  })

  it('shows a line appended to a template without a final newline as one added line', () => {
    const d = diffVersions(
      { template: 'a\nb', variables: [] },
      { template: 'a\nb\nc', variables: [] },
      labels,
    )
    expect(d.template).toEqual({
      hunks: [{ oldStart: 1, oldLines: 2, newStart: 1, newLines: 3, lines: [' a', ' b', '+c'] }],
      added: 1,
      removed: 0,
    })
    const fromEmpty = diffVersions({ template: '', variables: [] }, { template: 'a', variables: [] }, labels)
    expect(fromEmpty.template.hunks[0]?.lines).toEqual(['+a'])
    const toEmpty = diffVersions({ template: 'a', variables: [] }, { template: '', variables: [] }, labels)
    expect(toEmpty.template.hunks[0]?.lines).toEqual(['-a'])
  })

  it('shows a change that is only a trailing newline', () => {
    const d = diffVersions({ template: 'a', variables: [] }, { template: 'a\n', variables: [] }, labels)
    expect(d.template.hunks[0]?.lines).toEqual(['-a', '\\ No newline at end of file', '+a'])
    expect(d.template.added).toBe(1)
    expect(d.template.removed).toBe(1)
  })

  it('compares variables by name: added, removed, changed', () => {
    const from = [v('keep'), v('gone'), v('req'), v('desc', { description: 'old' }), v('dflt')]
    const to = [
      v('fresh', { required: false }),
      v('keep'),
      v('req', { required: false }),
      v('desc', { description: 'new' }),
      v('dflt', { defaultValue: 'x' }),
    ]
    const d = diffVersions({ template: 't', variables: from }, { template: 't', variables: to }, labels)
    expect(d.template).toEqual({ hunks: [], added: 0, removed: 0 })
    expect(d.variables.added).toEqual([v('fresh', { required: false })])
    expect(d.variables.removed).toEqual([v('gone')])
    expect(d.variables.changed).toEqual([
      { name: 'req', before: v('req'), after: v('req', { required: false }) },
      { name: 'desc', before: v('desc', { description: 'old' }), after: v('desc', { description: 'new' }) },
      { name: 'dflt', before: v('dflt'), after: v('dflt', { defaultValue: 'x' }) },
    ])
  })

  it('ignores the order of variables', () => {
    const d = diffVersions(
      { template: '', variables: [v('a'), v('b')] },
      { template: '', variables: [v('b'), v('a')] },
      labels,
    )
    expect(d.variables).toEqual({ added: [], removed: [], changed: [] })
  })

  it('treats a renamed variable as one removed and one added', () => {
    const d = diffVersions(
      { template: '{{a}}', variables: [v('a')] },
      { template: '{{b}}', variables: [v('b')] },
      { from: 'draft', to: 'v7' },
    )
    expect(d.from).toBe('draft')
    expect(d.to).toBe('v7')
    expect(d.variables.added.map((x) => x.name)).toEqual(['b'])
    expect(d.variables.removed.map((x) => x.name)).toEqual(['a'])
    expect(d.variables.changed).toEqual([])
    expect(d.template.added).toBe(1)
    expect(d.template.removed).toBe(1)
  })

  it('diffs chat messages by index and config as a whole', () => {
    const system = { role: 'system' as const, content: 'Be brief.' }
    const history = { type: 'placeholder' as const, name: 'history' }
    const d = diffVersions(
      {
        template: '',
        variables: [],
        messages: [system, { role: 'user', content: 'Hi {{name}}' }],
        config: { model: 'a', temperature: 0 },
      },
      {
        template: '',
        variables: [],
        messages: [system, history, { role: 'user', content: 'Hi {{name}}' }],
        config: { temperature: 0, model: 'b' },
      },
      labels,
    )
    expect(d.messages).toEqual({
      added: [{ index: 2, message: { role: 'user', content: 'Hi {{name}}' } }],
      removed: [],
      changed: [{ index: 1, before: { role: 'user', content: 'Hi {{name}}' }, after: history }],
    })
    expect(d.config).toEqual({
      changed: true,
      before: { model: 'a', temperature: 0 },
      after: { temperature: 0, model: 'b' },
      // Line by line, keys sorted: the one setting that changed is the one line that did.
      hunks: [
        {
          oldStart: 1,
          oldLines: 4,
          newStart: 1,
          newLines: 4,
          lines: [' {', '-  "model": "a",', '+  "model": "b",', '   "temperature": 0', ' }'],
        },
      ],
    })
    const same = diffVersions(
      { template: '', variables: [], messages: [system], config: { a: [1, { b: 2 }] } },
      { template: '', variables: [], messages: [{ ...system }], config: { a: [1, { b: 2 }] } },
      labels,
    )
    expect(same.messages).toEqual({ added: [], removed: [], changed: [] })
    expect(same.config.changed).toBe(false)
    const shorter = diffVersions(
      { template: '', variables: [], messages: [system, history] },
      { template: '', variables: [], messages: [system] },
      labels,
    )
    expect(shorter.messages.removed).toEqual([{ index: 1, message: history }])
    expect(shorter.config).toEqual({ changed: false, before: null, after: null, hunks: [] })
  })

  it('diffs config line by line: keys in any order are the same config; none is no text', () => {
    const side = { template: '', variables: [] }
    const reordered = diffVersions(
      { ...side, config: { model: 'a', tools: [{ name: 't', args: { x: 1, a: 2 } }] } },
      { ...side, config: { tools: [{ args: { a: 2, x: 1 }, name: 't' }], model: 'a' } },
      labels,
    )
    expect([reordered.config.changed, reordered.config.hunks]).toEqual([false, []])
    // A nested setting changed: only its line, with sorted keys around it as context.
    const nested = diffVersions(
      { ...side, config: { tools: [{ name: 't', args: { x: 1, a: 2 } }], model: 'a' } },
      { ...side, config: { model: 'a', tools: [{ name: 't', args: { a: 3, x: 1 } }] } },
      labels,
    )
    const changedLines = nested.config.hunks.flatMap((h) => h.lines).filter((l) => /^[-+]/.test(l))
    expect(changedLines).toEqual(['-        "a": 2,', '+        "a": 3,'])
    // Added where there was none: every line added, nothing removed.
    const added = diffVersions(side, { ...side, config: { model: 'a' } }, labels)
    expect(added.config).toEqual({
      changed: true,
      before: null,
      after: { model: 'a' },
      hunks: [{ oldStart: 1, oldLines: 0, newStart: 1, newLines: 3, lines: ['+{', '+  "model": "a"', '+}'] }],
    })
    // Stored before the depth limit, nested deeper than 64: compared whole, not line by line.
    let deep: unknown = 1
    for (let i = 0; i < 5_000; i++) deep = [deep]
    const tooDeep = diffVersions({ ...side, config: { deep } }, { ...side, config: { model: 'a' } }, labels)
    expect([tooDeep.config.changed, tooDeep.config.hunks]).toEqual([true, []])
    const removed = diffVersions({ ...side, config: { model: 'a' } }, side, labels)
    expect(removed.config.hunks.flatMap((h) => h.lines)).toEqual(['-{', '-  "model": "a"', '-}'])
  })

  describe('past DIFF_MAX_EDIT_LENGTH changed lines', () => {
    const lines = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix} ${i}`)

    it('answers two large, fully different templates as one hunk replacing every line', () => {
      const old = lines('old', 8000)
      const next = lines('new', 8000)
      const d = diffVersions(
        { template: old.join('\n'), variables: [] },
        { template: next.join('\n'), variables: [] },
        labels,
      )
      expect(d.template).toEqual({
        hunks: [
          {
            oldStart: 1,
            oldLines: 8000,
            newStart: 1,
            newLines: 8000,
            lines: [...old.map((l) => `-${l}`), ...next.map((l) => `+${l}`)],
          },
        ],
        added: 8000,
        removed: 8000,
      })
    })

    it('keeps the no-newline marker of the side without one, and numbers an empty side from 1', () => {
      const next = lines('new', DIFF_MAX_EDIT_LENGTH + 1)
      const grown = diffVersions(
        { template: '', variables: [] },
        { template: `${next.join('\n')}\n`, variables: [] },
        labels,
      )
      expect(grown.template.hunks).toEqual([
        { oldStart: 1, oldLines: 0, newStart: 1, newLines: next.length, lines: next.map((l) => `+${l}`) },
      ])
      const old = lines('old', DIFF_MAX_EDIT_LENGTH)
      const d = diffVersions(
        { template: `${old.join('\n')}\n`, variables: [] },
        { template: next.join('\n'), variables: [] },
        labels,
      )
      expect(d.template.hunks[0]?.lines.slice(-2)).toEqual([
        `+${next.at(-1)}`,
        '\\ No newline at end of file',
      ])
      expect(d.template).toMatchObject({ added: next.length, removed: old.length })
    })

    it('still diffs a change within the bound line by line', () => {
      const old = lines('same', 5000)
      const next = [...old]
      next[2500] = 'changed'
      const d = diffVersions(
        { template: old.join('\n'), variables: [] },
        { template: next.join('\n'), variables: [] },
        labels,
      )
      expect(d.template.hunks).toHaveLength(1)
      expect(d.template.hunks[0]).toMatchObject({ oldStart: 2498, oldLines: 7, newLines: 7 })
    })
  })
})
