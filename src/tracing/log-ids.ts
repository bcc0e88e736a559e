import { context, trace, type SpanContext } from '@opentelemetry/api'
import { statementsQuietUnder } from '../db/statement-spans.js'

// CONTRACT 15: with tracing on, a log line written while a request is handled carries the ids of its
// trace (a pino mixin, set only when tracing is on). Fastify writes a request's own lines through
// its request logger, some of them (the request line of plugins/request-log.ts) after the span
// has ended and outside its context: the logger is tied to the request's span as it starts.

const byLogger = new WeakMap<object, SpanContext>()

/** Lines written through `logger` (a request's) carry the ids of `span`. */
export function tieLoggerToSpan (logger: object, span: SpanContext): void {
  byLogger.set(logger, span)
}

/** pino's mixin: `trace_id` and `span_id` of the request being handled, if any. */
export function traceIdsMixin (_merge: object, _level: number, logger: object): Record<string, string> {
  let ids = byLogger.get(logger)
  if (ids === undefined) {
    // A line written through the service's own logger (a replica or the primary election
    // reporting) while a request waits on it. Not the watcher of live delivery, which inherits a
    // stream's context but works for every client.
    const span = trace.getSpan(context.active())
    if (span !== undefined && span.isRecording() && !statementsQuietUnder(span)) ids = span.spanContext()
  }
  return ids === undefined ? {} : { trace_id: ids.traceId, span_id: ids.spanId }
}
