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
  type ChatRenderOptions,
  type ChatRenderOutcome,
  type CompiledChat,
  type CompiledChatEntry,
  chatLogic,
  chatTemplate,
  chatVariableNames,
  compileChat,
  messageBlock,
  renderChat,
} from './chat.ts'
export {
  compileLogic,
  compileLogicIfAny,
  compileLogicOrFlat,
  DEFAULT_MAX_STEPS,
  flatNodes,
  MAX_BLOCK_DEPTH,
  type IncludeRef,
  type LogicNode,
  type LogicRef,
  type LogicRenderOptions,
  type LogicRenderOutcome,
  type LogicTemplate,
  type ReferenceVia,
  renderLogic,
  TemplateSyntaxError,
  templateSyntaxError,
  templateVariableNames,
  truthy,
} from './logic.ts'
