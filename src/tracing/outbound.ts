import type { UndiciInstrumentationConfig, UndiciRequest } from '@opentelemetry/instrumentation-undici'
import { ATTR_URL_FULL, ATTR_URL_QUERY } from '@opentelemetry/semantic-conventions'

// Outbound calls (the key set, userinfo, the weather upstream) through the maintained undici
// instrumentation: a client span each, and `traceparent` on the request. The weather upstream takes
// its key in the query (`appid=…`) and the city in `q`: every query value is replaced by REDACTED,
// as the semantic conventions do for known secrets, before the span starts.

/** The query with its values redacted; the keys stay, so the span still says what was asked. */
export function redactQuery (search: string): string {
  if (search === '' || search === '?') return search
  const params = new URLSearchParams(search)
  const redacted = [...params.keys()].map((key) => `${encodeURIComponent(key)}=REDACTED`)
  return `?${redacted.join('&')}`
}

function redactedUrl (request: UndiciRequest): Record<string, string> {
  const url = new URL(request.path, request.origin)
  const query = redactQuery(url.search)
  url.search = ''
  return { [ATTR_URL_FULL]: `${url.toString()}${query}`, [ATTR_URL_QUERY]: query }
}

export const UNDICI_OPTIONS: UndiciInstrumentationConfig = {
  // A call made for no traced request (none is) makes no span of its own.
  requireParentforSpans: true,
  startSpanHook: redactedUrl
}
