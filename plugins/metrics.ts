// metrics: what the service measures (CONTRACT 11), through prom-client; GET /metrics is routes/metrics.ts.
import { subscribe } from 'node:diagnostics_channel'
import { sql } from 'drizzle-orm'
import fp from 'fastify-plugin'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import { heavyReadCounts } from '../src/db/heavy-reads.js'
import { anchorSetReads, deepPageReads, type AnchorSetRead, type DeepPageRead } from '../src/pages/deep-page-reads.js'
import { liveDeliveries } from '../src/changes/live/delay-metric.js'
import { writeGroups, type WriteGroup } from '../src/messages/write-groups.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Everything measured, in the Prometheus text format: GET /metrics (routes/metrics.ts). */
    metricsText: () => Promise<{ contentType: string, text: string }>
  }
}

export interface MetricsPluginOptions {
  /** AUTH_ISSUER: outbound requests to it are counted as key-set fetches or userinfo calls. */
  issuer: string
  /** postgres: connections are read from pg_stat_activity; pglite: one embedded connection. */
  driver: 'postgres' | 'pglite'
  poolSize: number
}

// Requests that are not routed share one label value, so random URLs cannot grow the label set.
const UNMATCHED = 'unmatched'
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

interface UndiciRequestMessage { request: { origin?: unknown, path?: unknown } }

export default fp<MetricsPluginOptions>(async function metrics (app, opts) {
  const register = new Registry()
  collectDefaultMetrics({ register })

  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from request to response, by route pattern',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: BUCKETS,
    registers: [register]
  })
  const keySetFetches = new Counter({ name: 'auth_jwks_fetches_total', help: 'Key-set fetches sent to the identity provider', registers: [register] })
  const userinfoCalls = new Counter({ name: 'auth_userinfo_requests_total', help: 'Userinfo calls sent to the identity provider', registers: [register] })

  // Counted where the requests leave the process (undici's diagnostics channel), for this issuer only.
  const issuerOrigin = new URL(opts.issuer).origin
  const onUndiciRequest = (message: unknown): void => {
    const { origin, path } = (message as UndiciRequestMessage).request
    // origin is a string or a URL depending on the caller.
    if (origin === undefined || origin === null || typeof path !== 'string' || new URL(String(origin)).origin !== issuerOrigin) return
    if (path.startsWith('/.well-known/jwks.json')) keySetFetches.inc()
    else if (path.startsWith('/v2/oauth/userinfo')) userinfoCalls.inc()
  }
  subscribe('undici:request:create', onUndiciRequest)

  // Pages at offset 1,000 or more, by how they were read: from the anchors of their result set, by
  // the order-statistic counters, or by OFFSET (src/pages/reader.ts).
  const deepPages = new Counter({ name: 'pagination_deep_pages_total', help: 'Pages read at offset 1,000 or more, by table and by how they were located', labelNames: ['table', 'via'] as const, registers: [register] })
  const onDeepPage = (message: unknown): void => {
    const { table, via } = message as DeepPageRead
    deepPages.inc({ table, via })
  }
  deepPageReads.subscribe(onDeepPage)
  // How long a result set's deep pages went without their anchors: each read of them, from its start
  // (the first deep page) to its end, by sort, whole or given up (src/pages/anchors/reader.ts).
  const anchorReads = new Histogram({
    name: 'pagination_anchor_read_seconds',
    help: 'Reads of a result set\'s anchors, from the first deep page to their end, by table, sort and outcome',
    labelNames: ['table', 'sort', 'outcome'] as const,
    buckets: [0.05, 0.25, 1, 2.5, 5, 10, 20, 40, 80],
    registers: [register]
  })
  const onAnchorRead = (message: unknown): void => {
    const { table, sort, outcome, seconds } = message as AnchorSetRead
    anchorReads.observe({ table, sort, outcome }, seconds)
  }
  anchorSetReads.subscribe(onAnchorRead)
  app.addHook('onClose', async () => {
    const { unsubscribe } = await import('node:diagnostics_channel')
    unsubscribe('undici:request:create', onUndiciRequest)
    deepPageReads.unsubscribe(onDeepPage)
    anchorSetReads.unsubscribe(onAnchorRead)
  })

  // Live delivery (CONTRACT 13): clients held, what watching costs the database, and how long after a
  // change became answerable its answer or event was written.
  register.registerMetric(new Gauge({
    name: 'live_long_polls_held',
    help: 'Long-polls on the change feed held by this instance',
    registers: [],
    collect () { this.set(app.changes.stats().heldPolls) }
  }))
  register.registerMetric(new Gauge({
    name: 'live_streams_open',
    help: 'Server-Sent Event streams of the change feed open on this instance',
    registers: [],
    collect () { this.set(app.changes.stats().openStreams) }
  }))
  register.registerMetric(new Counter({
    name: 'live_watch_queries_total',
    help: 'Reads of the change-log head by this instance\'s watcher (one per interval while clients wait, however many)',
    registers: [],
    collect () { this.reset(); this.inc(app.changes.stats().watchReads) }
  }))
  register.registerMetric(new Counter({
    name: 'live_answer_reads_total',
    help: 'Answers read for waiting positions: one per position, shared by every client waiting there',
    registers: [],
    collect () { this.reset(); this.inc(app.changes.stats().answerReads) }
  }))
  register.registerMetric(new Gauge({
    name: 'live_streams_paced',
    help: 'Streams waiting for their client to read what they were sent before they get their next answer',
    registers: [],
    collect () { this.set(app.changes.stats().pacedStreams) }
  }))
  register.registerMetric(new Counter({
    name: 'live_streams_stalled_total',
    help: 'Streams closed because their client read nothing for LIVE_STALL_S',
    registers: [],
    collect () { this.reset(); this.inc(app.changes.stats().stalledStreams) }
  }))
  register.registerMetric(new Gauge({
    name: 'live_unsent_bytes',
    help: 'Event bytes written to this instance\'s streams that their clients have not taken yet, with room taken for answers being read; at most LIVE_UNSENT_BYTES',
    registers: [],
    collect () { this.set(app.changes.stats().unsentBytes) }
  }))
  // CONTRACT 16: that room is shared among client addresses; streams whose address holds its share wait.
  register.registerMetric(new Gauge({
    name: 'live_streams_waiting',
    help: 'Streams whose next answer waits for room among what their client address may hold unsent',
    registers: [],
    collect () { this.set(app.changes.stats().waitingStreams) }
  }))
  register.registerMetric(new Gauge({
    name: 'live_unsent_addresses',
    help: 'Client addresses whose streams hold unsent bytes or wait for room',
    registers: [],
    collect () { this.set(app.changes.stats().unsentAddresses) }
  }))
  const liveDelay = new Histogram({
    name: 'live_delivery_delay_seconds',
    help: 'From a change becoming answerable (the watcher read that found it) to its answer or event being written to every client waiting for it; one observation per answer',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [register]
  })
  const onLiveDelivery = (delay: unknown): void => { liveDelay.observe(delay as number) }
  liveDeliveries.subscribe(onLiveDelivery)
  app.addHook('onClose', async () => { liveDeliveries.unsubscribe(onLiveDelivery) })

  // Creates are written in groups (src/messages/writer.ts): how many per statement, how long the
  // oldest waited for the statement, and how long the statement took, commit included.
  const groupSize = new Histogram({ name: 'message_write_group_size', help: 'Creates written by one grouped INSERT', buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512], registers: [register] })
  const groupWait = new Histogram({ name: 'message_write_group_wait_seconds', help: 'How long the oldest create of a group waited in the queue before its statement was sent', buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25], registers: [register] })
  const groupStatement = new Histogram({ name: 'message_write_group_statement_seconds', help: 'From sending a grouped INSERT to its answer, commit included', buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: [register] })
  const onWriteGroup = (message: unknown): void => {
    const group = message as WriteGroup
    groupSize.observe(group.size)
    groupWait.observe(group.waitSeconds)
    groupStatement.observe(group.statementSeconds)
  }
  writeGroups.subscribe(onWriteGroup)
  app.addHook('onClose', async () => { writeGroups.unsubscribe(onWriteGroup) })

  // Reads that walk many rows, admitted per database handle (src/db/heavy-reads.ts, CONTRACT 16): how
  // many run and wait, how many were refused (at once, or after their wait), and how many were given
  // up because their client had gone (still waiting, or cancelled while running).
  register.registerMetric(new Gauge({
    name: 'db_heavy_reads',
    help: 'Reads that walk many rows (OFFSET walks, search matches, anchor sets), running or waiting for a place',
    labelNames: ['state'] as const,
    registers: [],
    collect () {
      const { running, waiting } = heavyReadCounts()
      this.set({ state: 'running' }, running)
      this.set({ state: 'waiting' }, waiting)
    }
  }))
  register.registerMetric(new Counter({
    name: 'db_heavy_reads_shed_total',
    help: 'Heavy reads answered 503: at once, every place to wait (or the client\'s share of them) taken (reason "full"), or after waiting their bounded time (reason "waited")',
    labelNames: ['reason'] as const,
    registers: [],
    collect () {
      const { shed } = heavyReadCounts()
      this.reset()
      this.inc({ reason: 'full' }, shed.full)
      this.inc({ reason: 'waited' }, shed.waited)
    }
  }))
  register.registerMetric(new Counter({
    name: 'db_heavy_reads_abandoned_total',
    help: 'Heavy reads given up because their client had gone: while waiting, never started (state "waiting"), or while running, cancelled (state "running")',
    labelNames: ['state'] as const,
    registers: [],
    collect () {
      const { abandoned } = heavyReadCounts()
      this.reset()
      this.inc({ state: 'waiting' }, abandoned.waiting)
      this.inc({ state: 'running' }, abandoned.running)
    }
  }))

  // Pool gauges, read at scrape time. postgres.js does not expose its pool, so the server's own
  // view of this application's connections is used (all instances sharing the database).
  new Gauge({ name: 'db_pool_max_connections', help: 'Configured maximum connections of this instance', registers: [register] }).set(opts.driver === 'pglite' ? 1 : opts.poolSize)
  register.registerMetric(new Gauge({
    name: 'db_connections',
    help: 'Database connections of messages-api by state (postgres: pg_stat_activity of this database; pglite: the one embedded connection)',
    labelNames: ['state'] as const,
    registers: [],
    async collect () {
      if (opts.driver === 'pglite') {
        this.set({ state: 'active' }, 1)
        this.set({ state: 'idle' }, 0)
        return
      }
      try {
        const rows = await app.db.execute(sql`select count(*) filter (where state = 'active')::int as active, count(*) filter (where state <> 'active')::int as idle from pg_stat_activity where datname = current_database() and application_name = 'messages-api' and pid <> pg_backend_pid()`) as unknown as Array<{ active: number, idle: number }>
        const row = Array.isArray(rows) ? rows[0] : (rows as unknown as { rows: Array<{ active: number, idle: number }> }).rows[0]
        this.set({ state: 'active' }, row?.active ?? 0)
        this.set({ state: 'idle' }, row?.idle ?? 0)
      } catch {
        // An unreachable database leaves the last values; the scrape itself still succeeds.
      }
    }
  }))

  // Synchronous: one observe per request, the route pattern as label, /metrics itself excluded.
  app.addHook('onResponse', function (request, reply, done) {
    const route = request.routeOptions.url
    if (route !== '/metrics') {
      duration.observe({ method: request.method, route: route ?? UNMATCHED, status_code: reply.statusCode }, reply.elapsedTime / 1000)
    }
    done()
  })

  app.decorate('metricsText', async () => ({ contentType: register.contentType, text: await register.metrics() }))
}, { name: 'metrics', fastify: '5.x', dependencies: ['db', 'changes'] })
