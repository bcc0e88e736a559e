import { context, SpanStatusCode, trace, type Span } from '@opentelemetry/api'
import { ATTR_ERROR_TYPE } from '@opentelemetry/semantic-conventions'

// Spans and attributes for the service's own steps that take time (CONTRACT 15). Only
// @opentelemetry/api: with tracing off no span is ever active, and each call below is one lookup.

const TRACER = 'messages-api'

/** Whether a read was answered from the page or item cache (src/http-cache/version-cache.ts). */
export const CACHE_ATTRIBUTE = 'messages_api.cache'

/** The span of the request being handled, when it is sampled and not yet answered. */
function recordingSpan (): Span | undefined {
  const span = trace.getSpan(context.active())
  return span?.isRecording() === true ? span : undefined
}

/** A failure's class for error.type: its code (API_…, a driver's), else its name; never its message. */
export function errorType (err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && code !== '') return code
  return err instanceof Error ? err.name : 'Error'
}

/**
 * Runs `step` as a span of its own under the traced request, active while it runs, so its outbound
 * calls and statements are its children. `step` gets the span (undefined when nothing is traced).
 */
export async function inStepSpan<T> (name: string, step: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (recordingSpan() === undefined) return await step(undefined)
  return await trace.getTracer(TRACER).startActiveSpan(name, async (span) => {
    try {
      return await step(span)
    } catch (err) {
      span.setAttribute(ATTR_ERROR_TYPE, errorType(err))
      span.setStatus({ code: SpanStatusCode.ERROR })
      throw err
    } finally {
      span.end()
    }
  })
}

/** The page or item cache's answer, as an attribute of the request's span. */
export function noteCacheLookup (hit: boolean): void {
  recordingSpan()?.setAttribute(CACHE_ATTRIBUTE, hit ? 'hit' : 'miss')
}
