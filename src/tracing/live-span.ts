import { context, trace } from '@opentelemetry/api'
import { quietStatementsUnder } from '../db/statement-spans.js'

/** How many answers or events a held long-poll or an open stream was given. */
export const DELIVERIES_ATTRIBUTE = 'messages_api.live.deliveries'
export const LIVE_ATTRIBUTE = 'messages_api.live'

export interface LiveSpan {
  /** One answer or event written to the client. */
  delivered: () => void
}

const UNTRACED: LiveSpan = { delivered () {} }

/**
 * Tracing's one touch point in live delivery (CONTRACT 15): a held long-poll or an open stream is
 * the span of its request, which ends when the request ends, and counts its deliveries in an
 * attribute rather than a span each. Called while the request is handled, as the client starts to
 * wait (its span is then the active one).
 *
 * The instance's change watcher and the hub's shared reads inherit the context of the request that
 * happened to start them, and serve every client for as long as anyone waits: their statements are
 * not this request's, so none is traced under it from now on.
 */
export function liveSpan (kind: 'long-poll' | 'stream'): LiveSpan {
  const span = trace.getSpan(context.active())
  if (span === undefined || !span.isRecording()) return UNTRACED
  quietStatementsUnder(span)
  span.setAttributes({ [LIVE_ATTRIBUTE]: kind, [DELIVERIES_ATTRIBUTE]: 0 })
  let deliveries = 0
  return {
    delivered () {
      deliveries++
      // Once the request has ended its span takes nothing more (and would warn).
      if (span.isRecording()) span.setAttribute(DELIVERIES_ATTRIBUTE, deliveries)
    }
  }
}
