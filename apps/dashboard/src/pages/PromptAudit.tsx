import { usePrompt } from '../prompt.ts'
import { ResourceAuditLog } from './settings/AuditLog.tsx'

/** The prompt's own audit entries (DESIGN section 15): the organization's log, filtered by it. */
export function PromptAudit() {
  const prompt = usePrompt()
  return <ResourceAuditLog resourceId={prompt._id} name={prompt.name} />
}
