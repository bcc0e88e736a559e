import type { AttributeValue, ExportedSpan } from './otlp-receiver.js'

// One trace as an indented tree, the way a tracing backend draws it: docs/operations.md's renderings are
// this function's output over traces the tests receive.

/** The attributes shown after a span's name, when it has them. */
const SHOWN = [
  'http.response.status_code',
  'messages_api.cache',
  'db.query.summary',
  'messages_api.db.role',
  'user.id',
  'server.address',
  'server.port',
  'messages_api.live',
  'messages_api.live.deliveries',
  'error.type'
]

const KINDS: Record<number, string> = { 1: 'internal', 2: 'server', 3: 'client' }

function shown (attributes: Record<string, AttributeValue>, name: string, kind: number): string {
  // A client span is named by its method alone (the conventions'): its address says what it called.
  const keys = kind === 3 && attributes['url.path'] !== undefined ? ['url.path', ...SHOWN] : SHOWN
  const parts = keys.filter((key) => attributes[key] !== undefined && !(key === 'db.query.summary' && attributes[key] === name))
    .map((key) => `${key}=${String(attributes[key])}`)
  return parts.length === 0 ? '' : `  [${parts.join(' ')}]`
}

export interface RenderOptions {
  /** Each span's duration in milliseconds (they differ from run to run). */
  durations?: boolean
}

/**
 * Renders the spans of one trace: a line per span, children under their parent in start order.
 * A span whose parent is not among them (the caller's, for a request that carried traceparent)
 * is a root, and says so.
 */
export function renderTrace (spans: readonly ExportedSpan[], options: RenderOptions = {}): string {
  const ids = new Set(spans.map((span) => span.spanId))
  const children = new Map<string, ExportedSpan[]>()
  for (const span of spans) {
    const parent = ids.has(span.parentSpanId) ? span.parentSpanId : ''
    children.set(parent, [...(children.get(parent) ?? []), span].sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0)))
  }
  const lines: string[] = []
  function line (span: ExportedSpan, prefix: string, last: boolean, root: boolean): void {
    const duration = options.durations === true ? `  ${(Number(span.endNs - span.startNs) / 1e6).toFixed(1)} ms` : ''
    const caller = root && span.parentSpanId !== '' ? '  (child of the caller\'s span)' : ''
    const branch = root ? '' : last ? '└─ ' : '├─ '
    lines.push(`${prefix}${branch}${span.name}  (${KINDS[span.kind] ?? 'span'})${shown(span.attributes, span.name, span.kind)}${duration}${caller}`)
    const below = children.get(span.spanId) ?? []
    const next = root ? prefix : `${prefix}${last ? '   ' : '│  '}`
    below.forEach((child, i) => { line(child, next, i === below.length - 1, false) })
  }
  for (const root of children.get('') ?? []) line(root, '', true, true)
  return lines.join('\n')
}
