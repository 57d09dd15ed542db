export {
  type CompiledTemplate,
  compileTemplate,
  extractPlaceholders,
  type Slot,
} from './compile.ts'
export {
  formatValue,
  type RenderMode,
  type RenderOptions,
  type RenderOutcome,
  renderCompiled,
  renderTemplate,
} from './render.ts'
export { type SyncedVariables, syncVariableNames, syncVariables } from './variables.ts'
export {
  asMessageList,
  type ChatRenderOutcome,
  type CompiledChat,
  type CompiledChatEntry,
  chatTemplate,
  chatVariableNames,
  compileChat,
  messageBlock,
  renderChat,
} from './chat.ts'
