import { existsSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import sparticuz from '@sparticuz/chromium'
import { chromium, type Browser } from 'playwright-core'
import type { Test } from 'tap'

// A browser is never downloaded: Debian's Chromium when it is installed, otherwise the one that
// ships inside the @sparticuz/chromium package (unpacked under the temp folder on first use).

const DEBIAN_CHROMIUM = '/usr/bin/chromium'

// Nothing the browser does on its own may leave loopback.
const OFFLINE = ['--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-domain-reliability', '--disable-quic', '--no-first-run', '--no-pings']

// The package's flags are tuned for serverless hosts; these would relax the checks a user's browser makes.
const RELAXED = new Set(['--disable-web-security', '--allow-running-insecure-content', '--disable-site-isolation-trials'])

export interface BrowserChoice {
  source: 'debian' | 'npm'
  executablePath: string
  args: string[]
}

export async function chooseBrowser (): Promise<BrowserChoice> {
  if (existsSync(DEBIAN_CHROMIUM)) {
    return { source: 'debian', executablePath: DEBIAN_CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', ...OFFLINE] }
  }
  return {
    source: 'npm',
    executablePath: await sparticuz.executablePath(),
    args: [...sparticuz.args.filter((arg) => !RELAXED.has(arg)), ...OFFLINE]
  }
}

export async function launchBrowser (choice: BrowserChoice): Promise<Browser> {
  return await chromium.launch({ executablePath: choice.executablePath, headless: true, args: choice.args })
}

/** A web client's origin for a browser test: an empty page on its own loopback port, closed with the test. */
export async function startPageOrigin (t: Test): Promise<string> {
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
    res.end('<!doctype html><title>client</title>')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const address = server.address()
  if (address === null || typeof address !== 'object') throw new Error('no address')
  return `http://127.0.0.1:${address.port}`
}
