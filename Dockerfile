# syntax=docker/dockerfile:1
# One image for every process of the service; compose's `command` picks what runs, e.g.
#   node apps/ingest/dist/main.js | node libs/db/dist/migrate-cli.js | node libs/bus/dist/apply-cli.js
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS base
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false

# The lockfile and every workspace manifest, nothing else, so the `npm ci` layer below is
# reused until a dependency changes. Found by `find` so a new workspace needs no edit here.
FROM base AS manifests
COPY . /src
RUN mkdir /out \
 && cd /src \
 && cp package.json package-lock.json .npmrc /out/ \
 && find apps libs -mindepth 2 -maxdepth 2 -name package.json -exec cp --parents {} /out/ \;

FROM base AS build
# package.json pins npm 11 (packageManager; allowScripts needs >= 11.16); node 20 ships npm 10.
ARG NPM_VERSION=11.19.1
RUN npm install --global npm@${NPM_VERSION}
COPY --from=manifests /out/ ./
# npm ci refuses the current lock file: it lacks the other platforms' optional biome/turbo
# binaries (see scripts/setup.mjs). Until the lock is regenerated, fall back to npm install,
# which keeps the locked versions, and say so in the build log.
RUN --mount=type=cache,target=/root/.npm \
    npm ci \
 || { echo "WARNING: npm ci refused package-lock.json; falling back to npm install" >&2; \
      npm install --no-audit --no-fund; }
COPY . .
RUN npm run build \
 && npm prune --omit=dev \
 && mkdir /runtime \
 && cp -a package.json node_modules nats drizzle /runtime/ \
 && for dir in libs/* apps/*; do \
      [ -f "$dir/package.json" ] || continue; \
      mkdir -p "/runtime/$dir"; \
      cp "$dir/package.json" "/runtime/$dir/"; \
      if [ -d "$dir/dist" ]; then cp -a "$dir/dist" "/runtime/$dir/"; fi; \
      if [ -d "$dir/node_modules" ]; then cp -a "$dir/node_modules" "/runtime/$dir/"; fi; \
    done

# Runtime: production dependencies, each workspace's package.json + dist, and the data the
# libraries read at run time (nats/topology.json for the bus, drizzle/ for migrations).
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /runtime/ ./
USER node
EXPOSE 3000 3001 3002 3003 3010
CMD ["node", "apps/ingest/dist/main.js"]
