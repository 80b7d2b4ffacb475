# syntax=docker/dockerfile:1
# One image for every process of the service; compose's `command` picks what runs, e.g.
#   node apps/ingest/dist/main.js | node libs/db/dist/migrate-cli.js | node libs/bus/dist/apply-cli.js
#   node apps/standalone/dist/main.js (the four apps in one process, for one machine)
#   node libs/cli/dist/main.js (the `notify` command)
# It carries the production workspaces below and their production dependencies only: nothing
# from libs/devstack, libs/testing or tools/ (sandboxes, embedded Postgres, node-forge) and no
# build or test tool. tools/repo-checks/test/image-dependencies.test.ts reads this list and
# checks that.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS base
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false

# The lockfile, every workspace manifest and the patches `npm ci` applies to dependencies
# (patches/, by patch-package), nothing else, so the `npm ci` layer below is reused until a
# dependency changes. Found by `find` so a new workspace needs no edit here.
FROM base AS manifests
COPY . /src
RUN mkdir /out \
 && cd /src \
 && cp package.json package-lock.json /out/ \
 && cp -r patches /out/ \
 && find apps libs tools -mindepth 2 -maxdepth 2 -name package.json -exec cp --parents {} /out/ \;

FROM base AS build
# package.json pins npm 11 (packageManager; allowScripts needs >= 11.16).
ARG NPM_VERSION=11.19.1
# Every workspace the image runs, with every @notify/* library they depend on.
ARG PRODUCTION_WORKSPACES="libs/core libs/config libs/telemetry libs/log libs/db libs/bus libs/providers libs/http libs/ops libs/console libs/cli apps/ingest apps/processor apps/workers apps/receipts apps/standalone"
RUN npm install --global npm@${NPM_VERSION}
COPY --from=manifests /out/ ./
RUN --mount=type=cache,target=/root/.npm npm ci
COPY . .
# The workspaces the image does not run are deleted before pruning, so the prune drops what only
# they need; --omit=optional drops typescript, which valibot names as an optional peer.
RUN for dir in libs/* apps/* tools/*; do \
      case " ${PRODUCTION_WORKSPACES} " in *" $dir "*) ;; *) rm -rf "$dir" ;; esac; \
    done \
 && npx tsc -b ${PRODUCTION_WORKSPACES} \
 && npm prune --omit=dev --omit=optional \
 && find node_modules -mindepth 1 -maxdepth 1 -type d -empty -delete \
 && mkdir /runtime \
 && cp -a package.json node_modules nats drizzle /runtime/ \
 && for dir in ${PRODUCTION_WORKSPACES}; do \
      mkdir -p "/runtime/$dir"; \
      cp "$dir/package.json" "/runtime/$dir/"; \
      cp -a "$dir/dist" "/runtime/$dir/"; \
      if [ -d "$dir/node_modules" ]; then cp -a "$dir/node_modules" "/runtime/$dir/"; fi; \
    done

# The provider sandboxes for compose (dev and demos only, never deployed): the whole workspace
# with its dev dependencies, running libs/devstack's sandbox-cli. `docker build --target sandbox`;
# the runtime stage below stays the last one, so a plain `docker build` builds the service image.
FROM base AS sandbox
ARG NPM_VERSION=11.19.1
RUN npm install --global npm@${NPM_VERSION}
COPY --from=manifests /out/ ./
RUN --mount=type=cache,target=/root/.npm npm ci
COPY . .
RUN npx tsc -b libs/devstack
USER node
EXPOSE 3010 3013 3014
CMD ["node", "libs/devstack/dist/sandbox-cli.js"]

# Runtime: production dependencies, each workspace's package.json + dist, and the data the
# libraries read at run time (nats/topology.json for the bus, drizzle/ for migrations).
FROM ${NODE_IMAGE} AS runtime
# Semi-spaces of 32 MB (V8's default: 16) halve a busy app's young-generation collections and
# take a quarter off their time; as the dev stack starts the apps (libs/devstack, APP_NODE_OPTIONS).
ENV NODE_ENV=production \
    NODE_OPTIONS=--max-semi-space-size=32
WORKDIR /app
COPY --from=build /runtime/ ./
USER node
EXPOSE 3000 3001 3002 3003
CMD ["node", "apps/ingest/dist/main.js"]
