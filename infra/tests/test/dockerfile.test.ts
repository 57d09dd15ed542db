// biome-ignore-all lint/suspicious/noTemplateCurlyInString: compose and Dockerfile syntax, not templates
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { APP_NAMES } from '../src/apps.ts'
import {
  checkDockerfile,
  checkDockerignore,
  checkOneDockerfile,
  checkSameCommandsAsCi,
  expandShell,
  parseDockerfile,
  stagesOf,
} from '../src/dockerfile.ts'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))

describe('the Dockerfile', () => {
  it.each(APP_NAMES)(
    'Dockerfile with APP=%s: prune, frozen install, build, prod deploy, slim non-root runtime',
    (app) => {
      expect(checkDockerfile(app, ROOT)).toEqual([])
    },
  )

  it('is one file for every app, chosen by APP (no copies), and runs the commands CI runs', () => {
    expect(checkOneDockerfile(ROOT)).toEqual([])
    expect(checkSameCommandsAsCi(ROOT)).toEqual([])
  })

  it('.dockerignore keeps dependencies, builds, secrets and git out of the context', () => {
    expect(checkDockerignore(ROOT)).toEqual([])
  })
})

describe('the Dockerfile reader', () => {
  it('joins continuation lines, drops comments, splits stages', () => {
    const text = [
      '# syntax=docker/dockerfile:1',
      'ARG NODE_VERSION=24',
      'FROM node:${NODE_VERSION}-bookworm-slim AS base',
      'RUN a \\',
      '  # a comment inside',
      '  && b',
      'FROM base',
      'USER 1000:1000',
    ].join('\n')
    const { args, stages } = stagesOf(parseDockerfile(text))
    expect(args).toEqual({ NODE_VERSION: '24' })
    expect(stages.map((s) => [s.from, s.name])).toEqual([
      ['node:${NODE_VERSION}-bookworm-slim', 'base'],
      ['base', undefined],
    ])
    expect(stages[0]?.instructions).toEqual([{ keyword: 'RUN', args: 'a && b' }])
  })
})

describe('the shell expansion of a RUN step', () => {
  it('substitutes set values, keeps an unset ${X:?...}, drops quotes', () => {
    expect(expandShell('turbo prune "@pm/${APP:?say which}" --out /o', { APP: 'runs' })).toBe(
      'turbo prune @pm/runs --out /o',
    )
    expect(expandShell('a ${APP:?say which} $B ${C:-d}', {})).toBe('a ${APP:?say which}  d')
  })
})

describe('the Dockerfile checks catch', () => {
  /** A scratch repository root holding the real files but a changed Dockerfile (and maybe a copy). */
  function withDockerfile(change: (text: string) => string, copyFor?: string): string {
    const root = mkdtempSync(join(tmpdir(), 'pm-dockerfile-'))
    for (const file of ['package.json', 'pnpm-lock.yaml']) cpSync(join(ROOT, file), join(root, file))
    mkdirSync(join(root, 'apps', 'render'), { recursive: true })
    const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    writeFileSync(join(root, 'Dockerfile'), change(text))
    if (copyFor) writeFileSync(join(root, 'apps', copyFor, 'Dockerfile'), text)
    return root
  }

  it('a root or named user, a fixed port, a thawed install', () => {
    const root = withDockerfile((t) =>
      t
        .replace('USER 1000:1000', 'USER node\nEXPOSE 4003')
        .replaceAll('pnpm install --frozen-lockfile', 'pnpm install'),
    )
    const problems = checkDockerfile('render', root).join('\n')
    expect(problems).toMatch(/runtime user node is not a numeric non-root uid/)
    expect(problems).toMatch(/EXPOSE 4003, but render listens on 4003: the file serves every app/)
    expect(problems).toMatch(/no step pnpm install --frozen-lockfile/)
  })

  it('a stage that uses APP without declaring it (empty there, as Docker does)', () => {
    const root = withDockerfile((t) => t.replace('FROM base AS build\nARG APP\n', 'FROM base AS build\n'))
    expect(checkDockerfile('runs', root)).toEqual([
      'Dockerfile: stage build uses APP without declaring ARG APP in it',
    ])
  })

  it('an app named in the file, a default APP, no guard for an empty one, a per-app copy', () => {
    const root = withDockerfile(
      (t) =>
        t
          .replace('FROM base AS prune\nARG APP', 'FROM base AS prune\nARG APP=render')
          .replace(/"@pm\/\$\{APP:\?[^}]*\}"/, '@pm/render'),
      'render',
    )
    const problems = checkOneDockerfile(root).join('\n')
    expect(problems).toMatch(
      /apps\/render\/Dockerfile: a copy; build from Dockerfile with --build-arg APP=render/,
    )
    expect(problems).toMatch(/Dockerfile: names the app render/)
    expect(problems).toMatch(/ARG APP has a default/)
    expect(problems).toMatch(/no step refuses an empty APP/)
  })

  it('tool versions that drift from the repository pins, and a non-slim or old Node', () => {
    const root = withDockerfile((t) =>
      t
        .replace('ARG PNPM_VERSION=10.34.9', 'ARG PNPM_VERSION=9.0.0')
        .replace('ARG NODE_VERSION=24', 'ARG NODE_VERSION=22'),
    )
    const problems = checkDockerfile('render', root).join('\n')
    expect(problems).toMatch(/pnpm 9.0.0, the repository pins 10.34.9/)
    expect(problems).toMatch(/starts from node:22-bookworm-slim, not a Node 24 slim image/)
  })

  it('a runtime that copies the source tree or builds', () => {
    const root = withDockerfile((t) =>
      t.replace('COPY --from=build /prod/app ./', 'COPY . .\nRUN pnpm install'),
    )
    const problems = checkDockerfile('render', root).join('\n')
    expect(problems).toMatch(/runtime copies from the build context/)
    expect(problems).toMatch(/runtime stage installs or builds/)
  })
})
