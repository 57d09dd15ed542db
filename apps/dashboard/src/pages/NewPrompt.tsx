import { useMutation, useQueryClient } from '@tanstack/react-query'
import { type FormEvent, useState } from 'react'
import { useNavigate } from 'react-router'
import type { ChatMessage, PromptType } from '@pm/contracts'
import { TemplateEditor } from '../TemplateEditor.tsx'
import { MessagesEditor } from '../chat.tsx'
import { ConfigEditor, parseConfig } from '../config.tsx'
import { parseTags } from '../prompt.ts'
import { client } from '../session.ts'
import { ErrorBanner, Field } from '../ui.tsx'
import { useMutateOnce } from '../once.ts'

/** A new draft prompt: name, description, tags and a first template. */
export function NewPrompt() {
  const navigate = useNavigate()
  const queryClient = useQueryClient()
  const [name, setName] = useState('')
  const [description, setDescription] = useState('')
  const [tags, setTags] = useState('')
  const [template, setTemplate] = useState('')
  const [type, setType] = useState<PromptType>('text')
  const [messages, setMessages] = useState<ChatMessage[]>([
    { role: 'system', content: '' },
    { role: 'user', content: '' },
  ])
  const [configText, setConfigText] = useState('')
  const config = parseConfig(configText)
  const create = useMutation({
    mutationFn: () => {
      if (!config.ok) throw new Error(`The config is not valid: ${config.error}.`)
      return client.api.createPrompt({
        body: {
          name,
          description,
          tags: parseTags(tags),
          type,
          ...(type === 'chat' ? { messages } : { template }),
          ...(config.value ? { config: config.value } : {}),
        },
      })
    },
    onSuccess: (prompt) => {
      queryClient.invalidateQueries({ queryKey: ['prompts'] })
      navigate(`/prompts/${prompt._id}`)
    },
  })
  const createOnce = useMutateOnce(create)
  const submit = (e: FormEvent) => {
    e.preventDefault()
    createOnce()
  }
  return (
    <>
      <div className="page-head">
        <h1>New prompt</h1>
      </div>
      <form className="editor" onSubmit={submit}>
        <ErrorBanner error={create.error} title="The prompt was not created" />
        <Field
          label="Name"
          id="new-name"
          required
          maxLength={200}
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <div className="field">
          <label htmlFor="new-description">Description</label>
          <textarea
            id="new-description"
            rows={2}
            maxLength={2000}
            value={description}
            onChange={(e) => setDescription(e.target.value)}
          />
        </div>
        <Field
          label="Tags"
          id="new-tags"
          placeholder="support, email"
          aria-describedby="new-tags-hint"
          value={tags}
          onChange={(e) => setTags(e.target.value)}
        >
          <span id="new-tags-hint" className="hint">
            Separated by commas.
          </span>
        </Field>
        <fieldset className="field type-choice">
          <legend>Type</legend>
          <label>
            <input type="radio" name="type" checked={type === 'text'} onChange={() => setType('text')} />{' '}
            Text: one template
          </label>
          <label>
            <input type="radio" name="type" checked={type === 'chat'} onChange={() => setType('chat')} />{' '}
            Chat: role messages (fixed once created)
          </label>
        </fieldset>
        {type === 'chat' ? (
          <MessagesEditor messages={messages} onChange={setMessages} />
        ) : (
          <div className="field">
            <label htmlFor="new-template">Template</label>
            <TemplateEditor
              id="new-template"
              label="Template"
              describedBy="new-template-hint"
              value={template}
              onChange={setTemplate}
              placeholder="Hello {{ name }}!"
            />
            <span id="new-template-hint" className="hint">
              Placeholders such as <code>{'{{ name }}'}</code> become required variables; you can change that
              in the editor.
            </span>
          </div>
        )}
        <ConfigEditor text={configText} onChange={setConfigText} />
        <div className="actions">
          <button type="button" className="btn" onClick={() => navigate('/prompts')}>
            Cancel
          </button>
          <button type="submit" className="btn btn-primary" disabled={create.isPending || !config.ok}>
            {create.isPending ? 'Creating…' : 'Create draft'}
          </button>
        </div>
      </form>
    </>
  )
}
