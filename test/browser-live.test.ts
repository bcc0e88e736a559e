import t from 'tap'
import { chooseBrowser, launchBrowser, startPageOrigin } from './helpers/browser.js'
import { createAuthor, createMessages } from './helpers/fixtures.js'
import { listen } from './helpers/live.js'

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
