import { FastifyOtelInstrumentation } from '@fastify/otel'
import { context, diag, DiagLogLevel, propagation, trace, type DiagLogger } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { ExportResultCode, loggingErrorHandler, setGlobalErrorHandler, W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider, type Sampler, type SpanExporter
} from '@opentelemetry/sdk-trace'
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions'
import type { FastifyPluginCallback } from 'fastify'
import { UNDICI_OPTIONS } from './outbound.js'
import { nameServerSpan } from './server-spans.js'
import type { TracesSampler, TracingConfig } from './settings.js'
import { oncePerInterval, type WarnLog } from './warnings.js'

// The OpenTelemetry SDK, started from the validated configuration (src/config.ts) and stopped with
// the app. @opentelemetry/sdk-trace reads no environment of its own; the OTLP exporters still fill
// what they are not given (OTEL_EXPORTER_OTLP_COMPRESSION, …) from the same variables.

export interface Tracing {
  /** @fastify/otel's plugin: one server span per request, for routes registered after it. */
  fastifyPlugin: FastifyPluginCallback
  /** Flushes what is queued (bounded by SHUTDOWN_FLUSH_MS) and stops; the process can start tracing again. */
  shutdown: () => Promise<void>
}

/** How long closing the app waits for the last spans to reach the collector. */
export const SHUTDOWN_FLUSH_MS = 2_000

const SAMPLERS: Record<TracesSampler, (ratio: number) => Sampler> = {
  always_on: () => new AlwaysOnSampler(),
  always_off: () => new AlwaysOffSampler(),
  traceidratio: (ratio) => new TraceIdRatioBasedSampler(ratio),
  parentbased_always_on: () => new ParentBasedSampler({ root: new AlwaysOnSampler() }),
  parentbased_always_off: () => new ParentBasedSampler({ root: new AlwaysOffSampler() }),
  parentbased_traceidratio: (ratio) => new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) })
}

function exporterFor (config: TracingConfig): JsonTraceExporter | ProtobufTraceExporter {
  const options = { url: config.endpoint, headers: config.headers, timeoutMillis: config.timeoutMs }
  return config.protocol === 'http/json' ? new JsonTraceExporter(options) : new ProtobufTraceExporter(options)
}

/**
 * The exporter, its failures reported here: a collector that is down, failing or slow makes every
 * batch fail, and each is one call to `warn` (which logs one a minute). The batch processor is told
 * it is done with the batch either way (it drops a failed one all the same), so the SDK's global
 * error handler, which a process shares, does not report it a second time. Once stopped, a late
 * failure of an export still under way is not reported at all.
 */
function reporting (exporter: SpanExporter, warn: (message: string, err?: unknown) => void, stopped: () => boolean): SpanExporter {
  return {
    export (spans, done) {
      exporter.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS && !stopped()) warn('exporting spans failed; they are dropped', result.error)
        done({ code: ExportResultCode.SUCCESS })
      })
    },
    shutdown: async () => { await exporter.shutdown() },
    forceFlush: async () => { await exporter.forceFlush?.() }
  }
}

/** The SDK's own diagnostics (dropped spans, failed exports), at most one warning a minute, in the service's log. */
function diagLogger (warn: (message: string, err?: unknown) => void): DiagLogger {
  const report = (message: string, ...args: unknown[]): void => { warn(message, args.find((arg) => arg instanceof Error)) }
  const ignore = (): void => {}
  return { error: report, warn: report, info: ignore, debug: ignore, verbose: ignore }
}

let running = false

/**
 * Starts tracing for one app: the tracer provider with a bounded batch queue and the OTLP exporter,
 * W3C trace context in and out, and the instrumentations (server spans, outbound undici calls).
 * OpenTelemetry's API keeps one provider per process, so one app at a time may trace.
 */
export function startTracing (config: TracingConfig, log: WarnLog): Tracing {
  if (running) throw new Error('tracing is already started in this process (one app at a time)')
  running = true
  let stopped = false
  const warn = oncePerInterval(log)
  diag.setLogger(diagLogger(warn), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true })
  // What else the SDK fails at (a batch that outlived OTEL_BSP_EXPORT_TIMEOUT), in the same warnings.
  setGlobalErrorHandler((err) => { if (!stopped) warn('exporting spans failed; they are dropped', err) })

  const provider = new TracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ ...config.resourceAttributes, [ATTR_SERVICE_NAME]: config.serviceName })),
    sampler: SAMPLERS[config.sampler](config.samplerRatio),
    spanProcessors: [new BatchSpanProcessor({
      exporter: reporting(exporterFor(config), warn, () => stopped),
      maxQueueSize: config.batch.maxQueueSize,
      maxExportBatchSize: config.batch.maxExportBatchSize,
      scheduledDelayMillis: config.batch.scheduleDelayMs,
      exportTimeoutMillis: config.batch.exportTimeoutMs
    })]
  })
  const contextManager = new AsyncLocalStorageContextManager().enable()
  context.setGlobalContextManager(contextManager)
  // traceparent and tracestate only: baggage from a caller is not passed on to the upstreams.
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(provider)

  // Hook and handler spans would be a dozen per request; the request's span and what it waits on are the trace.
  const server = new FastifyOtelInstrumentation({ requestHook: nameServerSpan, instrumentHooks: false, instrumentHandler: false, recordExceptions: false })
  const undici = new UndiciInstrumentation(UNDICI_OPTIONS)
  for (const instrumentation of [server, undici]) instrumentation.setTracerProvider(provider)

  return {
    fastifyPlugin: server.plugin(),
    async shutdown () {
      undici.disable()
      server.disable()
      let timer: NodeJS.Timeout | undefined
      const flushed = provider.shutdown().catch((err: unknown) => { warn('flushing spans at shutdown failed', err) })
      // A collector that does not answer holds the last batch: closing does not wait for it.
      await Promise.race([flushed, new Promise((resolve) => { timer = setTimeout(resolve, SHUTDOWN_FLUSH_MS) })])
      clearTimeout(timer)
      stopped = true
      trace.disable()
      propagation.disable()
      context.disable()
      setGlobalErrorHandler(loggingErrorHandler())
      diag.disable()
      running = false
    }
  }
}
