import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { freePort } from '../../scripts/free-port.js'
import { buildDevIdp } from '../../src/dev-idp/app.js'

/**
 * The local development identity provider on a loopback port of its own, with keys in a temp folder;
 * both go when the test ends. It must know its own address (the iss claim) before it listens.
 */
export async function startDevIdp (t: Test, audience: string): Promise<string> {
  const dataDir = await mkdtemp(join(tmpdir(), 'dev-idp-'))
  const issuer = `http://127.0.0.1:${await freePort()}`
  const idp = await buildDevIdp({ issuer, audience, dataDir })
  await idp.listen({ host: '127.0.0.1', port: Number(new URL(issuer).port) })
  t.teardown(async () => {
    await idp.close()
    await rm(dataDir, { recursive: true, force: true })
  })
  return issuer
}
