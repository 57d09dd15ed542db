import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { buildParamsChecks, checkParams, workspaceIdInput } from '../src/inputs.ts'
import { ROUTES } from '../src/policy.ts'

const ID = '0123456789abcdef01234567'

describe('inputs the gateway uses itself', () => {
  const checks = buildParamsChecks()

  it('has a parameter schema for every route with path parameters', () => {
    for (const route of ROUTES) {
      if (route.url.includes(':')) expect(checks.has(`${route.method} ${route.url}`), route.url).toBe(true)
    }
  })

  it.each([
    ['a\tb'],
    ['a\u0000b'],
    [`${ID}/${ID}?`],
    [`${ID}#`],
    ['x'.repeat(10_000)],
    ['not-an-id'],
    [ID.toUpperCase()],
  ])('refuses the path id %j with 400 VALIDATION_ERROR', (id) => {
    const thrown = (() => {
      try {
        checkParams(checks, 'GET', '/api/v1/organizations/:id', { id })
      } catch (err) {
        return err
      }
    })()
    expect(thrown).toBeInstanceOf(AppError)
    expect((thrown as AppError).code).toBe('VALIDATION_ERROR')
  })

  it('lets a well-formed id through', () => {
    expect(() => checkParams(checks, 'GET', '/api/v1/organizations/:id', { id: ID })).not.toThrow()
  })

  it.each([['\u0000'], ['a\tb'], [`${ID}/${ID}?`], [[ID, ID]], [42], [null], [{ $ne: null }]])(
    'refuses the workspace id %j',
    (value) => {
      expect(() => workspaceIdInput(value, '/query/organizationId')).toThrow(AppError)
    },
  )

  it('takes an absent workspace id as absent, and a good one as it is', () => {
    expect(workspaceIdInput(undefined, '/query/organizationId')).toBeUndefined()
    expect(workspaceIdInput(ID, '/query/organizationId')).toBe(ID)
  })
})
