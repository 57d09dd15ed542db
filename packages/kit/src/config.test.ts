import { Type } from '@sinclair/typebox'
import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './config.ts'
import { commonSettings } from './settings.ts'

const Schema = Type.Object({
  ...commonSettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4000 }),
  FLAG: Type.Boolean({ default: false }),
})

describe('loadConfig', () => {
  const secret = 's'.repeat(32)

  it('applies defaults and coerces numbers and booleans', () => {
    const config = loadConfig(Schema, { INTERNAL_AUTH_SECRET: secret, FLAG: 'true', UNRELATED: 'x' })
    expect(config).toMatchObject({ PORT: 4000, FLAG: true, NODE_ENV: 'production', HOST: '0.0.0.0' })
    expect(config).not.toHaveProperty('UNRELATED')
  })

  it('names every bad or missing variable', () => {
    expect(() => loadConfig(Schema, { PORT: 'eighty' })).toThrow(ConfigError)
    try {
      loadConfig(Schema, { PORT: '70000', NODE_ENV: 'staging' })
    } catch (err) {
      expect((err as Error).message).toMatch(/INTERNAL_AUTH_SECRET: is required/)
      expect((err as Error).message).toMatch(/PORT: must be <= 65535/)
      expect((err as Error).message).toMatch(/NODE_ENV/)
    }
  })
})
