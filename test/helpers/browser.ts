import { existsSync } from 'node:fs'
import { mkdir, rm, stat, writeFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
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
    executablePath: await unpackedChromium(),
    args: [...sparticuz.args.filter((arg) => !RELAXED.has(arg)), ...OFFLINE]
  }
}

// The package unpacks its browser into the temp folder on first use, and takes a browser file that
// exists there as unpacked. Test files run in parallel: one started the half-written file of another
// (spawn ETXTBSY). So one process at a time unpacks, under a lock directory, and a marker written
// once the unpacking resolved tells the others (and later runs) that the files are whole; without
// it a browser file left by an interrupted run is removed and unpacked again.
const LOCK = join(tmpdir(), 'chromium-unpack.lock')
const UNPACKED = join(tmpdir(), 'chromium-unpacked')
// A lock older than this was left by a process that died holding it.
const STALE_LOCK_MS = 120_000

async function unpackedChromium (): Promise<string> {
  const deadline = Date.now() + 5 * STALE_LOCK_MS
  for (;;) {
    try {
      await mkdir(LOCK)
      break
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || Date.now() > deadline) throw err
      const held = await stat(LOCK).catch(() => undefined)
      if (held !== undefined && Date.now() - held.mtimeMs > STALE_LOCK_MS) await rm(LOCK, { recursive: true, force: true })
      await sleep(100)
    }
  }
  try {
    if (!existsSync(UNPACKED)) await rm(join(tmpdir(), 'chromium'), { force: true })
    const path = await sparticuz.executablePath()
    await writeFile(UNPACKED, path)
    return path
  } finally {
    await rm(LOCK, { recursive: true, force: true })
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
