import type { InvokeResult, LoginResponse, Prompt, PromptVersion } from '@pm/contracts'
import { describe, expectTypeOf, it } from 'vitest'
import type { ApiMethods, InputOf, ResultOf } from '../src/index.ts'

// Compile-time checks: `pnpm typecheck` fails when the catalogue and the client's types drift.
describe('types come from the catalogue', () => {
  it('gives each operation its payload type', () => {
    expectTypeOf<ResultOf<'getPrompt'>>().toEqualTypeOf<Prompt>()
    expectTypeOf<ResultOf<'invokePrompt'>>().toEqualTypeOf<InvokeResult>()
    expectTypeOf<ResultOf<'publishPrompt'>>().toEqualTypeOf<PromptVersion>()
    expectTypeOf<ResultOf<'login'>>().toEqualTypeOf<LoginResponse>()
    expectTypeOf<ResultOf<'logout'>>().toEqualTypeOf<undefined>()
    expectTypeOf<ResultOf<'getApiReference'>>().toEqualTypeOf<string>()
    expectTypeOf<ResultOf<'exportAuditLog'>>().toEqualTypeOf<string>()
  })

  it('requires what the route requires', () => {
    expectTypeOf<InputOf<'getPrompt'>['params']>().toEqualTypeOf<{ id: string }>()
    expectTypeOf<InputOf<'promoteVersion'>['params']['env']>().toEqualTypeOf<'preview' | 'production'>()
    expectTypeOf<ApiMethods['listPrompts']>().parameter(0).toEqualTypeOf<InputOf<'listPrompts'> | undefined>()
    const api = {} as ApiMethods
    const typed = () => {
      // @ts-expect-error the body is required
      void api.createPrompt({})
      // @ts-expect-error unknown body field
      void api.createPrompt({ body: { name: 'a', template: 'b', colour: 'red' } })
      // @ts-expect-error path parameters are required
      void api.getPrompt()
      void api.publishPrompt({ params: { id: 'x' } })
    }
    expectTypeOf(typed).toBeFunction()
  })
})
