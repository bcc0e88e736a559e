/**
 * The saturation row: 1,000 clients held, the write rate doubled step by step until the p99 delay of a
 * step passes LIMIT_MS (or the writers cannot make the rate); reports the deliveries a second reached there.
 */
import { loadavg } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { clientProblems, DRAIN_MS, exactProblems, openClients, tableProblems } from './delivery.js'
import type { SaturationReport, SaturationStep } from './report.js'
import type { DeliverySpec } from './rows.js'
import { commitSender, type LiveSession } from './session.js'
import { startLiveWriter } from './writer.js'

const LIMIT_MS = 100
const MAX_STEPS = 10
// A step whose writers make less than this share of the rate asked is the writers' limit, not the service's.
const MADE_SHARE = 0.8

export async function runSaturation (session: LiveSession, spec: DeliverySpec): Promise<SaturationReport> {
  const { service } = session
  const stepSeconds = Math.max(3, Math.round(session.seconds / 2))
  const report: SaturationReport = { key: spec.key, name: `Saturation, ${spec.mode === 'sse' ? 'SSE' : 'long-poll'}, ${spec.connections.toLocaleString('en-US')} clients`, mode: spec.mode, connections: spec.connections, stepSeconds, steps: [], limitMs: LIMIT_MS, problems: [] }
  const clients = await openClients(session, spec)
  const { fleet } = clients
  report.problems.push(...clients.problems)
  try {
    const sender = commitSender(fleet)
    let rate = spec.rate
    const writer = startLiveWriter({ base: service.base, tokens: session.apiTokens, bodies: session.bodies, sql: session.sql, authorIds: session.authorIds, rate, onCommit: sender.add })
    for (let step = 0; step < MAX_STEPS; step++) {
      if (step > 0) writer.setRate(rate)
      await fleet.window()
      const madeBefore = writer.count()
      const began = performance.now()
      await sleep(stepSeconds * 1000)
      const { window } = await fleet.window()
      const seconds = (performance.now() - began) / 1000
      const measured: SaturationStep = {
        rate,
        achievedRate: (writer.count() - madeBefore) / seconds,
        deliveriesPerSecond: window.events / seconds,
        p50: window.delay.p50,
        p99: window.delay.p99,
        max: window.delay.max,
        load: loadavg()[0]!
      }
      report.steps.push(measured)
      process.stdout.write(`bench: live saturation ${spec.mode}: ${rate} writes/s asked, ${measured.achievedRate.toFixed(0)} made, ${Math.round(measured.deliveriesPerSecond)} deliveries/s, p99 ${measured.p99.toFixed(1)} ms\n`)
      if (measured.p99 > LIMIT_MS) {
        report.passedAt = measured
        break
      }
      if (measured.achievedRate < rate * MADE_SHARE) {
        report.note = `the writers made ${measured.achievedRate.toFixed(0)} of ${rate} writes/s before the p99 delay passed ${LIMIT_MS} ms: the end is the writers' limit (POST and INSERT on this machine), not the delivery's`
        break
      }
      rate *= 2
    }
    const written = await writer.stop()
    sender.stop()
    const finished = await fleet.finish(written.writes, DRAIN_MS)
    report.exact = finished.exact
    report.problems.push(...written.problems.map((p) => `writer: ${p}`), ...exactProblems(finished.exact, spec.connections, written.writes.length), ...clientProblems(finished))
    const table = await tableProblems(session, clients.baseId, written.writes)
    if (table !== undefined && (table.missing > 0 || table.extra > 0)) report.problems.push(`the table lacks ${table.missing} written ids and holds ${table.extra} that nobody wrote`)
    return report
  } finally {
    await fleet.stop()
  }
}
