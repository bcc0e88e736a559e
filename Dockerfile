# syntax=docker/dockerfile:1
# Build: compile the TypeScript with every dependency, then keep only the production ones.
# Node 24 is the current LTS line (Node 20 reached end of life on 2026-04-30); .ci/run tests the code on
# it and runs the rolling-restart check's instances on it.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src src
COPY plugins plugins
COPY routes routes
COPY scripts scripts
COPY bench bench
COPY drizzle drizzle
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# Run: the compiled JavaScript on plain node, as the unprivileged `node` user of the base image.
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3001
WORKDIR /app
RUN chown node:node /app
COPY --from=build --chown=node:node /app/package.json ./package.json
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
USER node
EXPOSE 3001
# The slim image has no curl; node's fetch asks the readiness route, which answers 503 while the
# database is unreachable and from the moment a shutdown starts.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3001) + '/health/ready', { signal: AbortSignal.timeout(2500) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form: node itself receives SIGTERM and drains (CONTRACT 11, shutdown). The old generation is
# capped so V8 collects before garbage far outgrows what is live (scripts/service-args.ts, docs/operations.md, "Memory: what each cache may hold").
CMD ["node", "--max-old-space-size=192", "dist/src/server.js"]
