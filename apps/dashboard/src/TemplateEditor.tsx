import { defaultKeymap, history, historyKeymap } from '@codemirror/commands'
import { EditorState } from '@codemirror/state'
import {
  Decoration,
  type DecorationSet,
  EditorView,
  highlightSpecialChars,
  keymap,
  MatchDecorator,
  placeholder as placeholderExt,
  ViewPlugin,
  type ViewUpdate,
} from '@codemirror/view'
import { useEffect, useRef } from 'react'

/** `{{ name }}` as the template engine reads it (packages/template). */
export const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}/g

/** A placeholder, a block tag (`{{#if x}}`, `{{else}}`, `{{/if}}`, `{{@index}}`) or a reference (`{{> slug}}`). */
const TAG =
  /\{\{\s*(?:([#/])\s*(?:if|unless|each)\b[^{}]*|(else)|(@index)|>\s*([a-z0-9-]+(?:@[a-z0-9]+)?)|([A-Za-z_][A-Za-z0-9_.-]*))\s*\}\}/g

const placeholderMark = new MatchDecorator({
  regexp: TAG,
  decoration: (match) => {
    if (match[4])
      return Decoration.mark({ class: 'cm-reference', attributes: { title: `includes ${match[4]}` } })
    if (match[1] || match[2] || match[3])
      return Decoration.mark({ class: 'cm-block', attributes: { title: 'logic' } })
    return Decoration.mark({ class: 'cm-variable', attributes: { title: `variable ${match[5]}` } })
  },
})

const highlightVariables = ViewPlugin.fromClass(
  class {
    decorations: DecorationSet
    constructor(view: EditorView) {
      this.decorations = placeholderMark.createDeco(view)
    }
    update(update: ViewUpdate) {
      this.decorations = placeholderMark.updateDeco(update, this.decorations)
    }
  },
  { decorations: (v) => v.decorations },
)

/** The gateway's per-response style nonce (CodeMirror's theme goes into a <style> element). */
const cspNonce = document.querySelector<HTMLMetaElement>('meta[name="csp-nonce"]')?.content ?? ''

const theme = EditorView.theme({
  '&': { fontSize: '14px', border: '1px solid var(--border)', borderRadius: '6px', background: '#fff' },
  '&.cm-focused': { outline: '2px solid var(--focus)', outlineOffset: '1px' },
  '.cm-content': { fontFamily: 'var(--mono)', padding: '10px 0', minHeight: '12em', caretColor: '#111' },
  '.cm-line': { padding: '0 12px' },
  '.cm-scroller': { maxHeight: '60vh', overflow: 'auto' },
  '.cm-variable': {
    background: '#e5ecff',
    color: '#1d3a9e',
    borderRadius: '3px',
    fontWeight: '600',
  },
  '.cm-block': { background: '#fdf0d5', color: '#7a4b00', borderRadius: '3px', fontWeight: '600' },
  '.cm-reference': { background: '#dcf5e7', color: '#0b5d34', borderRadius: '3px', fontWeight: '600' },
  '.cm-placeholder': { color: '#6b7280' },
  '.cm-specialChar': { color: '#b42318', fontWeight: '700' },
})

/**
 * The template editor: CodeMirror 6 with `{{variables}}` highlighted. Tab is left to move
 * focus (keyboard users leave the editor as from any field); Ctrl/Cmd-Z undoes.
 */
export function TemplateEditor({
  value,
  onChange,
  id,
  label,
  describedBy,
  placeholder,
}: {
  value: string
  onChange: (value: string) => void
  id: string
  label: string
  describedBy?: string
  placeholder?: string
}) {
  const host = useRef<HTMLDivElement>(null)
  const view = useRef<EditorView | null>(null)
  const onChangeRef = useRef(onChange)
  onChangeRef.current = onChange

  useEffect(() => {
    if (!host.current) return
    const editor = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: value,
        extensions: [
          EditorView.cspNonce.of(cspNonce),
          history(),
          keymap.of([...defaultKeymap, ...historyKeymap]),
          EditorView.lineWrapping,
          // Control characters (a form feed or vertical tab pasted from a PDF) shown as a red
          // dot naming the character: the service refuses a template holding one.
          highlightSpecialChars(),
          highlightVariables,
          theme,
          placeholderExt(placeholder ?? ''),
          EditorView.contentAttributes.of({
            id,
            'aria-label': label,
            'aria-multiline': 'true',
            role: 'textbox',
            ...(describedBy ? { 'aria-describedby': describedBy } : {}),
          }),
          EditorView.updateListener.of((update) => {
            if (update.docChanged) onChangeRef.current(update.state.doc.toString())
          }),
        ],
      }),
    })
    view.current = editor
    return () => {
      editor.destroy()
      view.current = null
    }
  }, [])

  // A value set from outside (a restored version, a reset) replaces the document.
  useEffect(() => {
    const editor = view.current
    if (editor && editor.state.doc.toString() !== value) {
      editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: value } })
    }
  }, [value])

  return <div ref={host} className="template-editor" />
}
