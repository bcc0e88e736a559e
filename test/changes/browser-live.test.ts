import t from 'tap'
import { chooseBrowser, launchBrowser, startPageOrigin } from '../helpers/browser.js'
import { createAuthor, createMessages } from '../helpers/fixtures.js'
import { listen } from '../helpers/live.js'
import { SlowLink } from '../helpers/slow-link.js'
import { quiesce } from '../helpers/sync-client.js'

// CONTRACT 13 with CONTRACT 12 "Browsers", in real headless Chromium: a page on a listed origin opens
// an EventSource on the API's origin, gets the initial copy as an event, then an event for a message
// written afterwards.

/** The page's side: what the EventSource delivered, and the EventSource itself (no DOM types here). */
interface PageStream { addEventListener: (type: string, listener: (event: { data: string, lastEventId: string }) => void) => void, close: () => void, readyState: number }
interface PageState { received: Received[], errors: number, stream: PageStream, EventSource: new (url: string) => PageStream }
interface Received { lastEventId: string, answer: { data: Array<{ op: string, id: number, message?: { content: string } }>, next: string, hasMore: boolean } }

t.test('an EventSource on a listed origin streams the changes from Chromium', async (t) => {
  const allowed = await startPageOrigin(t)
  const { app, url } = await listen(t, { corsOrigins: [allowed] })
  const alice = await createAuthor(app, 'alice', { name: 'Alice' })
  await createMessages(app, alice.id, 2)
  // Once every transaction older than those writes has ended (in a shared server, another test's),
  // the copy is complete and current, and no row of it comes again (CONTRACT 12).
  await quiesce(app)

  const browser = await launchBrowser(await chooseBrowser())
  t.teardown(() => browser.close())
  const page = await (await browser.newContext()).newPage()
  page.setDefaultTimeout(20_000)
  await page.goto(allowed)

  await page.evaluate((source) => {
    const w = globalThis as unknown as PageState
    w.received = []
    w.errors = 0
    w.stream = new w.EventSource(source)
    w.stream.addEventListener('changes', (event) => { w.received.push({ lastEventId: event.lastEventId, answer: JSON.parse(event.data) }) })
    w.stream.addEventListener('error', () => { w.errors++ })
  }, `${url}/v2/messages/changes`)

  await page.waitForFunction(() => (globalThis as unknown as PageState).received.length >= 1)
  const [copy] = await page.evaluate(() => (globalThis as unknown as PageState).received)
  t.same(copy?.answer.data.map((e) => [e.op, e.id, e.message?.content]), [['upsert', 1, 'message 1'], ['upsert', 2, 'message 2']], 'the initial copy, as one event')
  t.equal(copy?.answer.hasMore, false)
  t.equal(copy?.lastEventId, copy?.answer.next, 'the event id is the answer\'s next')

  const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) }, payload: { content: 'written afterwards' } })
  t.equal(res.statusCode, 201)
  await page.waitForFunction(() => (globalThis as unknown as PageState).received.length >= 2)
  const received = await page.evaluate(() => (globalThis as unknown as PageState).received)
  t.same(received[1]?.answer.data, [{ op: 'upsert', id: res.json().id, message: res.json() }], 'the new message, as the next event')
  t.equal(received[1]?.lastEventId, received[1]?.answer.next)
  t.equal(await page.evaluate(() => (globalThis as unknown as PageState).stream.readyState), 1, 'the EventSource is still open')
  t.equal(await page.evaluate(() => (globalThis as unknown as PageState).errors), 0, 'no error: CORS let the page read the stream')
  await page.evaluate(() => { (globalThis as unknown as PageState).stream.close() })
})

t.test('a keep-alive moves Chromium\'s last event id: a reconnecting EventSource sends the stream\'s position, not its last event', async (t) => {
  const allowed = await startPageOrigin(t)
  const { app, url } = await listen(t, { corsOrigins: [allowed], liveHeartbeatS: 1 })
  const alice = await createAuthor(app, 'alice', { name: 'Alice' })
  await createMessages(app, alice.id, 1)
  await quiesce(app)
  // Between the page and the API, so that the connection can be ended under the EventSource.
  const link = await SlowLink.open(t, url, Number.POSITIVE_INFINITY)

  const browser = await launchBrowser(await chooseBrowser())
  t.teardown(() => browser.close())
  const page = await (await browser.newContext()).newPage()
  page.setDefaultTimeout(20_000)
  await page.goto(allowed)
  await page.evaluate((source) => {
    const w = globalThis as unknown as PageState
    w.received = []
    w.errors = 0
    w.stream = new w.EventSource(source)
    w.stream.addEventListener('changes', (event) => { w.received.push({ lastEventId: event.lastEventId, answer: JSON.parse(event.data) }) })
    w.stream.addEventListener('error', () => { w.errors++ })
  }, `${link.url}/v2/messages/changes`)
  await page.waitForFunction(() => (globalThis as unknown as PageState).received.length >= 1)
  const [copy] = await page.evaluate(() => (globalThis as unknown as PageState).received)

  // Two keep-alives after the copy reach the page; then the connection ends cleanly, after them.
  const first = link.connections[0]!
  const keepAliveIds = (): string[] => [...first.response.matchAll(/: keep-alive\nid: ([A-Za-z0-9_-]+)\n\n/g)].map((m) => m[1]!)
  const deadline = performance.now() + 60_000
  while (keepAliveIds().length < 2) {
    if (performance.now() > deadline) throw new Error(`no two keep-alives: ${first.response.slice(-300)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  first.end()
  while (link.connections.length < 2 || !link.connections[1]!.request.includes('\r\n\r\n')) {
    if (performance.now() > deadline + 60_000) throw new Error('Chromium did not reconnect')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const ids = keepAliveIds()
  const sent = /^last-event-id: (.*)$/im.exec(link.connections[1]!.request)?.[1]?.trim()
  t.not(ids.at(-1), copy?.lastEventId, 'a keep-alive\'s id is a new token for the position')
  // The last one passed on may still be in Chromium's buffers when it sees the end (on a loaded
  // machine it was, once): any keep-alive's id is the stream's position, which is what is checked.
  t.ok(sent !== undefined && ids.includes(sent), `Chromium reconnects with a keep-alive's id as Last-Event-ID (${String(sent)})`)

  const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': JSON.stringify({ sub: 'alice', role: 'User' }) }, payload: { content: 'after the reconnection' } })
  t.equal(res.statusCode, 201)
  await page.waitForFunction(() => (globalThis as unknown as PageState).received.length >= 2)
  const received = await page.evaluate(() => (globalThis as unknown as PageState).received)
  t.same(received.slice(1).flatMap((r) => r.answer.data), [{ op: 'upsert', id: res.json().id, message: res.json() }], 'and gets exactly what followed')
  await page.evaluate(() => { (globalThis as unknown as PageState).stream.close() })
})
