export { type CompiledTemplate, compileTemplate, extractPlaceholders, type Slot } from './compile.ts'
export {
  formatValue,
  type RenderMode,
  type RenderOutcome,
  renderCompiled,
  renderTemplate,
} from './render.ts'
export { type SyncedVariables, syncVariables } from './variables.ts'
