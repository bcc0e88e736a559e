import { existsSync } from 'node:fs'
import sparticuz from '@sparticuz/chromium'
import { chromium, type Browser } from 'playwright-core'

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
