# syntax=docker/dockerfile:1
# One image per app, all from this file: the app is a build argument. From the repository root:
#   docker build --build-arg APP=render -t prompt-service/render:0.1.0 .
# APP is one of gateway, identity, prompts, render, webhooks, runs, experiments (a directory
# of apps/ whose package is @pm/<APP>). The build runs the commands CI runs (pnpm install
# --frozen-lockfile, pnpm turbo run build), restricted to that app and the workspace packages
# it depends on. The port each app listens on is its PORT setting (docs/deploy.md), not baked
# into the image.

ARG NODE_VERSION=24
# The versions the repository pins: pnpm from package.json "packageManager", turbo from
# pnpm-lock.yaml (infra/tests checks both).
ARG PNPM_VERSION=10.34.9
ARG TURBO_VERSION=2.11.11

FROM node:${NODE_VERSION}-bookworm-slim AS base
ARG PNPM_VERSION
ARG TURBO_VERSION
# pnpm keeps its store in $PNPM_HOME/store: the cache mounts below.
ENV PNPM_HOME=/pnpm
ENV PATH=/pnpm:$PATH
# pnpm and turbo from the npm registry, as scripts/toolchain.sh installs them.
RUN npm install --global --no-audit --no-fund pnpm@${PNPM_VERSION} turbo@${TURBO_VERSION}

# 1. The slice of the monorepo the app needs: its package, the workspace packages it uses and
#    a lockfile cut down to them. A build without APP stops here, saying so.
FROM base AS prune
ARG APP
WORKDIR /repo
COPY . .
RUN turbo prune "@pm/${APP:?build with --build-arg APP=<gateway|identity|prompts|render|webhooks|runs|experiments>}" --docker --out-dir /out

# 2. Install from the lockfile first (cached until a package.json or the lockfile changes),
#    then build the app and its workspace dependencies (turbo's ^build).
FROM base AS build
ARG APP
WORKDIR /repo
COPY --from=prune /out/json/ ./
RUN --mount=type=cache,id=pnpm-store,target=/pnpm/store \
    pnpm install --frozen-lockfile
COPY --from=prune /out/full/ ./
COPY tsconfig.base.json ./
RUN pnpm turbo run build --filter="@pm/${APP}"
# Production dependencies only, with the workspace packages (their dist/) copied in.
RUN --mount=type=cache,id=pnpm-store,target=/pnpm/store \
    pnpm --filter="@pm/${APP}" deploy --prod --legacy /prod/app

# 3. The runtime: Node and the app, nothing else; files owned by root, run as the
#    unprivileged `node` user (uid 1000) of the image.
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ARG APP
LABEL org.opencontainers.image.title="prompt-service ${APP}"
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg \
    && mkdir -p /app/data && chown 1000:1000 /app/data
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /prod/app ./
USER 1000:1000
STOPSIGNAL SIGTERM
CMD ["node", "dist/server.js"]
