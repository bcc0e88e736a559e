import type { Page } from 'playwright-core'
import t from 'tap'
import { buildApp } from '../../src/app.js'
import { chooseBrowser, launchBrowser, startPageOrigin } from '../helpers/browser.js'
import { testConfig } from '../helpers/build.js'
import { startDevIdp } from '../helpers/dev-idp-server.js'
import { freshDatabase } from '../helpers/database.js'

// CONTRACT 12 "Browsers" in real headless Chromium: a page on one loopback origin calls the API on
// another, with a real RS256 token, and reads what CORS lets it read. A page on an unlisted origin cannot.

const AUDIENCE = 'backend-3-messages'

interface Answer { status: number, body: unknown, headers: Record<string, string | null> }

const READ = ['location', 'x-request-id', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'cross-origin-resource-policy']

/** fetch() run inside the page; a CORS failure comes back as the TypeError's message. */
async function pageFetch (page: Page, url: string, init: { method?: string, headers?: Record<string, string>, body?: string } = {}): Promise<Answer | string> {
  return await page.evaluate(async ({ url, init, read }) => {
    try {
      const res = await fetch(url, init)
      const text = await res.text()
      return { status: res.status, body: text === '' ? null : JSON.parse(text), headers: Object.fromEntries(read.map((name) => [name, res.headers.get(name)])) }
    } catch (err) {
      return String(err)
    }
  }, { url, init, read: READ })
}

t.test('a web client on another origin calls the API from Chromium', async (t) => {
  const issuer = await startDevIdp(t, AUDIENCE)
  const allowed = await startPageOrigin(t)
  const unlisted = await startPageOrigin(t)
  const database = await freshDatabase()
  const app = await buildApp(testConfig({
    databaseUrl: database.dataDir === undefined ? database.url : undefined, authIssuer: issuer, apiAudience: AUDIENCE, corsOrigins: [allowed], rateLimitMax: 100
  }), { logger: false, dataDir: database.dataDir })
  t.teardown(async () => {
    await app.close()
    await database.drop()
  })
  const api = await app.listen({ host: '127.0.0.1', port: 0 })
  const minted = await fetch(`${issuer}/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sub: 'alice', role: 'User', name: 'Alice' }) })
  const token = ((await minted.json()) as { access_token: string }).access_token

  const browser = await launchBrowser(await chooseBrowser())
  t.teardown(() => browser.close())
  const page = await (await browser.newContext()).newPage()
  page.setDefaultTimeout(15_000)

  await page.goto(allowed)
  const create = {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': 'browser-1' },
    body: JSON.stringify({ content: 'from a web client' })
  }
  const created = await pageFetch(page, `${api}/v2/messages`, create)
  t.match(created, {
    status: 201,
    body: { content: 'from a web client', author: { name: 'Alice' } },
    headers: { location: /^\/v2\/messages\/\d+$/, 'x-request-id': String, 'x-ratelimit-limit': '100', 'x-ratelimit-remaining': /^\d+$/ }
  }, 'a preflighted POST with Authorization, Content-Type and Idempotency-Key: the exposed headers are readable')
  t.equal((created as Answer).headers['cross-origin-resource-policy'], null, 'a header not exposed stays hidden from the page')

  const location = (created as Answer).headers.location ?? ''
  t.match(await pageFetch(page, `${api}${location}`), { status: 200, body: { content: 'from a web client' } }, 'a simple GET')
  const unauthorized = await pageFetch(page, `${api}/v2/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  t.match(unauthorized, { status: 401, body: { error: 'Invalid or missing token' }, headers: { 'x-request-id': String } },
    'an error answer is readable too')
  t.match(await pageFetch(page, `${api}${location}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } }), { status: 204, body: null }, 'a preflighted DELETE')

  await page.goto(unlisted)
  const refused = await pageFetch(page, `${api}/v2/messages`)
  t.match(refused, /TypeError: Failed to fetch/, 'an unlisted origin cannot read even a public list')
  t.match(await pageFetch(page, `${api}/v2/messages`, create), /TypeError: Failed to fetch/, 'nor send a preflighted request')
})
