import { mkdir } from 'node:fs/promises'
import type { Locator, Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { buildApp } from '../../src/app.js'
import type { AppConfig } from '../../src/config.js'
import { chooseBrowser, launchBrowser } from '../helpers/browser.js'
import { testConfig } from '../helpers/build.js'
import { startDevIdp } from '../helpers/dev-idp-server.js'
import { freshDatabase } from '../helpers/database.js'

// Swagger UI in real headless Chromium (Debian's, or the one inside an npm package; never
// downloaded), against the real API with real RS256 tokens from the local identity provider, all on loopback.

const ARTIFACTS = 'test-artifacts'
const AUDIENCE = 'backend-3-messages'
const EMAIL = 'alice@example.com'

interface Operation { security?: unknown[] }
interface Document { paths: Record<string, Record<string, Operation>> }

async function startApi (t: Test, issuer: string, over: Partial<AppConfig> = {}): Promise<string> {
  const database = await freshDatabase()
  const app = await buildApp(testConfig({ databaseUrl: database.dataDir === undefined ? database.url : undefined, authIssuer: issuer, apiAudience: AUDIENCE, ...over }), { logger: false, dataDir: database.dataDir })
  t.teardown(async () => {
    await app.close()
    await database.drop()
  })
  return await app.listen({ host: '127.0.0.1', port: 0 })
}

async function mintToken (issuer: string, role: string): Promise<string> {
  const res = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sub: 'alice', role, email: EMAIL, name: 'Alice' })
  })
  if (res.status !== 200) throw new Error(`identity provider answered ${res.status}`)
  return ((await res.json()) as { access_token: string }).access_token
}

const operation = (page: Page, method: string, path: string): Locator =>
  page.locator(`.opblock.opblock-${method}`).filter({ has: page.locator(`.opblock-summary-path[data-path="${path}"]`) })

async function tryItOut (page: Page, method: string, path: string): Promise<Locator> {
  const block = operation(page, method, path)
  await block.locator('.opblock-summary-control').click()
  await block.locator('button.try-out__btn').click()
  await block.locator('button.execute').click()
  const response = block.locator('.live-responses-table .response').first()
  await response.waitFor()
  return response
}

t.test('Swagger UI in headless Chromium', async (t) => {
  await mkdir(ARTIFACTS, { recursive: true })

  const issuer = await startDevIdp(t, AUDIENCE)
  const api = await startApi(t, issuer)
  const token = await mintToken(issuer, 'Admin')

  const content = `Shown in Swagger UI ${Date.now()}`
  const created = await fetch(`${api}/v2/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ content, subject: 'Browser test', priority: 'high' })
  })
  t.equal(created.status, 201, 'a message exists for the list to show')

  const document = await (await fetch(`${api}/api-docs/json`)).json() as Document
  const operations = Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ method, path, secured: (op.security ?? []).length > 0 })))

  const choice = await chooseBrowser()
  t.comment(`browser: ${choice.executablePath} (${choice.source})`)
  const browser = await launchBrowser(choice)
  t.teardown(() => browser.close())
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  const page = await context.newPage()
  page.setDefaultTimeout(15_000)

  // CSP violations reach the console as errors, and fire securitypolicyviolation in the page.
  const consoleErrors: string[] = []
  page.on('console', (message) => { if (message.type() === 'error') consoleErrors.push(message.text()) })
  page.on('pageerror', (error) => { consoleErrors.push(error.message) })
  await context.addInitScript(`
    window.cspViolations = []
    document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI))
  `)
  const cspViolations = async (): Promise<string[]> => await page.evaluate('window.cspViolations') as string[]

  t.test('every documented operation is shown, protected ones with a padlock', async (t) => {
    const loaded = await page.goto(`${api}/api-docs`)
    t.equal(loaded?.status(), 200)
    t.match(loaded?.headers()['content-security-policy'], /script-src 'self'/, 'served under the CSP')
    await page.locator('.opblock').first().waitFor()
    t.equal(await page.locator('.opblock').count(), operations.length, 'one block per operation')
    for (const { method, path, secured } of operations) {
      const block = operation(page, method, path)
      t.ok(await block.isVisible(), `${method.toUpperCase()} ${path} visible`)
      const padlock = block.locator('.authorization__btn')
      if (secured) t.equal(await padlock.getAttribute('aria-label'), 'authorization button unlocked', `${method.toUpperCase()} ${path} has a padlock`)
      else t.equal(await padlock.count(), 0, `${method.toUpperCase()} ${path} has none`)
    }
    t.ok(operations.some((o) => o.secured), 'some operations are protected')
    await page.screenshot({ path: `${ARTIFACTS}/api-docs.png`, fullPage: true })
  })

  t.test('Authorize with a token from the identity provider, kept across a reload', async (t) => {
    await page.locator('.auth-wrapper button.authorize').click()
    const modal = page.locator('.modal-ux')
    await modal.locator('input[aria-label="auth-bearer-value"]').fill(token)
    await modal.locator('button.authorize').click()
    await modal.getByText('Authorized').waitFor()
    await page.screenshot({ path: `${ARTIFACTS}/authorize.png` })
    await modal.locator('button.btn-done').click()

    const locked = page.locator('.opblock .authorization__btn[aria-label="authorization button locked"]')
    const securedCount = operations.filter((o) => o.secured).length
    t.equal(await locked.count(), securedCount, 'every protected operation is locked')

    await page.reload()
    await page.locator('.opblock').first().waitFor()
    await locked.first().waitFor()
    t.equal(await locked.count(), securedCount, 'still locked after a reload (persistAuthorization)')
    t.equal(await page.locator('.opblock .authorization__btn[aria-label="authorization button unlocked"]').count(), 0)
    await page.screenshot({ path: `${ARTIFACTS}/api-docs-authorized.png`, fullPage: true })
  })

  t.test('Try it out: GET /v2/hello', async (t) => {
    const response = await tryItOut(page, 'get', '/v2/hello')
    t.equal((await response.locator('.response-col_status').innerText()).trim(), '200')
    await response.getByText(`Hello, ${EMAIL}!`).first().waitFor()
    t.pass('greeting rendered')
    await page.screenshot({ path: `${ARTIFACTS}/hello-200.png`, fullPage: true })
  })

  t.test('Try it out: GET /v2/messages', async (t) => {
    const response = await tryItOut(page, 'get', '/v2/messages')
    t.equal((await response.locator('.response-col_status').innerText()).trim(), '200')
    await response.getByText(content).first().waitFor()
    t.pass('message rendered')
    await operation(page, 'get', '/v2/messages').screenshot({ path: `${ARTIFACTS}/messages-200.png` })
  })

  // In development the document also offers the local provider's sign-in (authorization code with
  // PKCE): Authorize opens its page in a popup, the developer picks a subject and a role, and the UI
  // exchanges the code for a token itself.
  t.test('Authorize signs in through the development identity provider, and Try it out creates a message', async (t) => {
    const devApi = await startApi(t, issuer, { devIdp: true })
    await page.goto(`${devApi}/api-docs`)
    await page.locator('.opblock').first().waitFor()
    await page.locator('.auth-wrapper button.authorize').click()
    const modal = page.locator('.modal-ux')
    const signIn = modal.locator('.auth-container').filter({ hasText: 'devSignIn' })
    await signIn.waitFor()
    const opened = page.waitForEvent('popup')
    await signIn.locator('button.authorize').click()
    const popup = await opened
    await popup.locator('#sub').fill('carol')
    await popup.locator('#role').selectOption('Moderator')
    await popup.locator('#email').fill('carol@example.com')
    await popup.screenshot({ path: `${ARTIFACTS}/sign-in.png` })
    await popup.getByRole('button', { name: 'Sign in' }).click()
    await signIn.getByText('Authorized').waitFor()
    t.pass('the dialog says Authorized')
    await page.screenshot({ path: `${ARTIFACTS}/signed-in.png` })
    await signIn.locator('button.btn-done').click()

    const response = await tryItOut(page, 'post', '/v2/messages')
    t.equal((await response.locator('.response-col_status').innerText()).trim(), '201', 'Try it out: 201 Created')
    await response.getByText('"priority": "high"').first().waitFor()
    t.pass('the created message is shown')
    await page.screenshot({ path: `${ARTIFACTS}/signed-in-201.png`, fullPage: true })
  })

  t.test('no CSP violation and no script error', async (t) => {
    t.same(await cspViolations(), [], 'no securitypolicyviolation event')
    t.same(consoleErrors, [], 'no console error')
  })
})
