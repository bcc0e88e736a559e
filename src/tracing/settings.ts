import { Type, type Static } from '@sinclair/typebox'

// CONTRACT 15: tracing is configured by the standard OTEL_* variables only
// (opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables and
// .../protocol/exporter). src/config.ts declares them with every other variable and reads them
// through tracingSettings; nothing else reads them.

export const TRACES_SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const
export type TracesSampler = typeof TRACES_SAMPLERS[number]
export type OtlpProtocol = 'http/protobuf' | 'http/json'

const protocol = () => Type.Optional(Type.Union([Type.Literal('http/protobuf'), Type.Literal('http/json')]))
const url = () => Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' }))
const milliseconds = () => Type.Optional(Type.Integer({ minimum: 1 }))

/** The OTEL_* part of the environment schema of src/config.ts. */
export const OTEL_ENV = {
  OTEL_SDK_DISABLED: Type.Optional(Type.String({ pattern: '^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$' })),
  OTEL_SERVICE_NAME: Type.Optional(Type.String({ minLength: 1 })),
  OTEL_RESOURCE_ATTRIBUTES: Type.Optional(Type.String()),
  OTEL_EXPORTER_OTLP_ENDPOINT: url(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url(),
  OTEL_EXPORTER_OTLP_PROTOCOL: protocol(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: protocol(),
  OTEL_EXPORTER_OTLP_HEADERS: Type.Optional(Type.String()),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: Type.Optional(Type.String()),
  OTEL_EXPORTER_OTLP_TIMEOUT: milliseconds(),
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: milliseconds(),
  OTEL_TRACES_SAMPLER: Type.Union(TRACES_SAMPLERS.map((name) => Type.Literal(name)), { default: 'parentbased_always_on' }),
  OTEL_TRACES_SAMPLER_ARG: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  OTEL_BSP_SCHEDULE_DELAY: Type.Integer({ minimum: 0, default: 5000 }),
  OTEL_BSP_EXPORT_TIMEOUT: Type.Integer({ minimum: 1, default: 30000 }),
  OTEL_BSP_MAX_QUEUE_SIZE: Type.Integer({ minimum: 1, default: 2048 }),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: Type.Integer({ minimum: 1, default: 512 })
}

const keyValues = 'must be a comma-separated list of key=value pairs (values percent-encoded)'
const protocols = 'must be http/protobuf or http/json (grpc is not supported)'

/** One line per variable, for src/config.ts's error messages. */
export const OTEL_MESSAGES: Record<keyof typeof OTEL_ENV, string> = {
  OTEL_SDK_DISABLED: 'must be true or false',
  OTEL_SERVICE_NAME: 'must not be empty',
  OTEL_RESOURCE_ATTRIBUTES: keyValues,
  OTEL_EXPORTER_OTLP_ENDPOINT: 'must be an http(s) URL',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'must be an http(s) URL',
  OTEL_EXPORTER_OTLP_PROTOCOL: protocols,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: protocols,
  OTEL_EXPORTER_OTLP_HEADERS: keyValues,
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: keyValues,
  OTEL_EXPORTER_OTLP_TIMEOUT: 'must be a positive integer (milliseconds)',
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: 'must be a positive integer (milliseconds)',
  OTEL_TRACES_SAMPLER: `must be one of ${TRACES_SAMPLERS.join(', ')}`,
  OTEL_TRACES_SAMPLER_ARG: 'must be a number from 0 to 1 (the sampling ratio)',
  OTEL_BSP_SCHEDULE_DELAY: 'must be a non-negative integer (milliseconds)',
  OTEL_BSP_EXPORT_TIMEOUT: 'must be a positive integer (milliseconds)',
  OTEL_BSP_MAX_QUEUE_SIZE: 'must be a positive integer (spans)',
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: 'must be a positive integer (spans), at most OTEL_BSP_MAX_QUEUE_SIZE'
}

export type OtelEnv = Static<ReturnType<typeof Type.Object<typeof OTEL_ENV>>>

/** Spans are batched in a queue of bounded size: what a collector that is down or slow can cost (CONTRACT 15). */
export interface BatchSettings {
  scheduleDelayMs: number
  exportTimeoutMs: number
  maxQueueSize: number
  maxExportBatchSize: number
}

export interface TracingConfig {
  serviceName: string
  /** OTEL_RESOURCE_ATTRIBUTES, service.name left out (serviceName holds it). */
  resourceAttributes: Record<string, string>
  /** The full address spans are posted to (…/v1/traces unless OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names it). */
  endpoint: string
  protocol: OtlpProtocol
  headers: Record<string, string>
  /** How long one export request may take. */
  timeoutMs: number
  sampler: TracesSampler
  /** The ratio of the traceidratio samplers (1 when not given). */
  samplerRatio: number
  batch: BatchSettings
}

/**
 * The W3C-baggage-like lists of OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS:
 * `key=value` pairs separated by commas, values percent-decoded. null when malformed.
 */
export function parseKeyValueList (value: string | undefined): Record<string, string> | null {
  const pairs: Record<string, string> = {}
  if (value === undefined || value.trim() === '') return pairs
  for (const entry of value.split(',')) {
    const at = entry.indexOf('=')
    const key = entry.slice(0, at).trim()
    if (at < 1 || key === '') return null
    try {
      pairs[key] = decodeURIComponent(entry.slice(at + 1).trim())
    } catch {
      return null
    }
  }
  return pairs
}

/** The specification's rule: the base endpoint gets the signal's path; the traces endpoint is used as it is. */
function tracesEndpoint (base: string | undefined, traces: string | undefined): string | undefined {
  if (traces !== undefined) return traces
  if (base === undefined) return undefined
  return `${base.endsWith('/') ? base.slice(0, -1) : base}/v1/traces`
}

/**
 * CONTRACT 15: tracing is on only when an OTLP endpoint is set and OTEL_SDK_DISABLED is not true.
 * Returns the settings, undefined when tracing is off, or the name of the variable that is invalid.
 */
export function tracingSettings (env: OtelEnv): TracingConfig | undefined | keyof OtelEnv {
  const resource = parseKeyValueList(env.OTEL_RESOURCE_ATTRIBUTES)
  if (resource === null) return 'OTEL_RESOURCE_ATTRIBUTES'
  const general = parseKeyValueList(env.OTEL_EXPORTER_OTLP_HEADERS)
  if (general === null) return 'OTEL_EXPORTER_OTLP_HEADERS'
  const traces = parseKeyValueList(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS)
  if (traces === null) return 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'
  if (env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE > env.OTEL_BSP_MAX_QUEUE_SIZE) return 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'
  const endpoint = tracesEndpoint(env.OTEL_EXPORTER_OTLP_ENDPOINT, env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
  if (endpoint === undefined || env.OTEL_SDK_DISABLED?.toLowerCase() === 'true') return undefined
  const { 'service.name': resourceServiceName, ...resourceAttributes } = resource
  return {
    // OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES (the specification's order).
    serviceName: env.OTEL_SERVICE_NAME ?? resourceServiceName ?? 'messages-api',
    resourceAttributes,
    endpoint,
    protocol: env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
    headers: { ...general, ...traces },
    timeoutMs: env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? env.OTEL_EXPORTER_OTLP_TIMEOUT ?? 10_000,
    sampler: env.OTEL_TRACES_SAMPLER,
    samplerRatio: env.OTEL_TRACES_SAMPLER_ARG ?? 1,
    batch: {
      scheduleDelayMs: env.OTEL_BSP_SCHEDULE_DELAY,
      exportTimeoutMs: env.OTEL_BSP_EXPORT_TIMEOUT,
      maxQueueSize: env.OTEL_BSP_MAX_QUEUE_SIZE,
      maxExportBatchSize: env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE
    }
  }
}
