import { mergeConfig } from 'vitest/config'
import base from '../../vitest.base.ts'

// The dashboard's tests keep Vite's module runner: a dependency of its (eventsource-parser)
// exports TypeScript under the "source" condition, which Node does not strip in node_modules.
export default mergeConfig(base, { test: { experimental: { viteModuleRunner: true } } })
