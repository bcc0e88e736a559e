#!/usr/bin/env bash
# What tracing costs (CONTRACT 15), in one sitting: the service's /health, page 1 and POST rows with
# tracing off, then on with every trace sampled, then with one in ten (parentbased_traceidratio 0.1),
# exporting to a loopback collector that keeps nothing (otlp-sink.ts). Each run writes
# bench/results/tracing-<setting>.md. Needs DATABASE_URL (PostgreSQL), as `npm run bench` does.
# Usage: DATABASE_URL=postgres://… bash bench/tracing/cost.sh [extra npm run bench options]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${DATABASE_URL:?DATABASE_URL must name a PostgreSQL database}"
ROWS=${ROWS:-health,page1-25,post}
SINK_PORT=${SINK_PORT:-43180}
node --import tsx bench/tracing/otlp-sink.ts "$SINK_PORT" &
sink=$!
trap 'kill "$sink" 2>/dev/null || true' EXIT
bench () { npm run bench -- --rows "$ROWS" --targets service "$@"; }
bench --out tracing-off "$@"
OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$SINK_PORT" OTEL_TRACES_SAMPLER=always_on bench --out tracing-on-1 "$@"
OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$SINK_PORT" OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1 bench --out tracing-on-0.1 "$@"
