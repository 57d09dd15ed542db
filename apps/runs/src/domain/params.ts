import { AppError, type PromptConfig, RunParams } from '@pm/contracts'
import { Value } from '@sinclair/typebox/value'

/** The parameter names a run reads from a prompt's `config` (the rest of config is the author's own). */
export const PARAM_NAMES = Object.keys(RunParams.properties) as (keyof RunParams)[]

/**
 * The parameters of a run: those `config` holds, overridden one by one by the request's. A
 * config value that a provider would refuse is a 400 naming it, before any call is made.
 */
export function mergeParams(config: PromptConfig, overrides: RunParams | undefined): RunParams {
  const merged: Record<string, unknown> = {}
  for (const name of PARAM_NAMES) {
    if (config[name] !== undefined && config[name] !== null) merged[name] = config[name]
  }
  for (const [name, value] of Object.entries(overrides ?? {})) {
    if (value !== undefined) merged[name] = value
  }
  if (!Value.Check(RunParams, merged)) {
    const details = [...Value.Errors(RunParams, merged)].slice(0, 10).map((e) => ({
      path: `${overrides && (e.path.split('/')[1] ?? '') in overrides ? '/body/params' : '/config'}${e.path}`,
      message: e.message,
    }))
    throw new AppError(
      'VALIDATION_ERROR',
      "the prompt's config holds parameters a model cannot take",
      details,
    )
  }
  return merged as RunParams
}

/** The model of a run: the request's, else the prompt's `config.model`, else the connection's first. */
export function chooseModel(requested: string | undefined, config: PromptConfig, models: string[]): string {
  if (requested) return requested
  const fromConfig = config.model
  if (typeof fromConfig === 'string' && /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$/.test(fromConfig))
    return fromConfig
  const first = models[0]
  if (first) return first
  throw new AppError(
    'VALIDATION_ERROR',
    'no model: give `model`, set `config.model` on the prompt, or list models on the connection',
    [{ path: '/body/model', message: 'required when neither the prompt nor the connection names a model' }],
  )
}
