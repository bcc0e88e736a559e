import { randomBytes } from 'node:crypto'
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose'

export const DEFAULT_KEYS_DIR = '.data/dev-idp'
export const KEYS_FILE = 'keys.json'
export const KEY_ALG = 'RS256' as const

/** The public half of the key pair, as served in the key set. */
export interface PublicJwk {
  kty: 'RSA'
  n: string
  e: string
  kid: string
  alg: typeof KEY_ALG
  use: 'sig'
}

export interface DevIdpKeys {
  kid: string
  privateKey: CryptoKey
  publicKey: CryptoKey
  publicJwk: PublicJwk
}

interface StoredKeys {
  kid: string
  privateJwk: JWK
  publicJwk: PublicJwk
}

function publicPart (jwk: JWK, kid: string): PublicJwk {
  if (typeof jwk.n !== 'string' || typeof jwk.e !== 'string') throw new Error('not an RSA key')
  return { kty: 'RSA', n: jwk.n, e: jwk.e, kid, alg: KEY_ALG, use: 'sig' }
}

async function generateStoredKeys (): Promise<StoredKeys> {
  const { privateKey } = await generateKeyPair(KEY_ALG, { extractable: true })
  const privateJwk = await exportJWK(privateKey)
  const kid = await calculateJwkThumbprint(privateJwk)
  return { kid, privateJwk: { ...privateJwk, kid, alg: KEY_ALG, use: 'sig' }, publicJwk: publicPart(privateJwk, kid) }
}

function parseStoredKeys (text: string, file: string): StoredKeys {
  const stored = JSON.parse(text) as Partial<StoredKeys>
  if (typeof stored.kid !== 'string' || stored.privateJwk?.kty !== 'RSA' || stored.publicJwk?.kty !== 'RSA') {
    throw new Error(`${file} is not a development identity provider key file; delete it to create a new key pair`)
  }
  return stored as StoredKeys
}

async function readStoredKeys (file: string): Promise<StoredKeys | undefined> {
  try {
    return parseStoredKeys(await readFile(file, 'utf8'), file)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}

// Written to a private temporary file, then hard-linked into place: link fails when the file
// already exists, so two processes starting at once agree on one key pair and nobody reads half a file.
async function writeStoredKeysOnce (dir: string, file: string, keys: StoredKeys): Promise<StoredKeys> {
  const temporary = join(dir, `.${KEYS_FILE}.${process.pid}.${randomBytes(4).toString('hex')}`)
  await writeFile(temporary, JSON.stringify(keys, null, 2) + '\n', { mode: 0o600, flag: 'wx' })
  try {
    await link(temporary, file)
    return keys
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    return parseStoredKeys(await readFile(file, 'utf8'), file)
  } finally {
    await unlink(temporary)
  }
}

async function importKeys (stored: StoredKeys): Promise<DevIdpKeys> {
  const [privateKey, publicKey] = await Promise.all([
    importJWK(stored.privateJwk, KEY_ALG) as Promise<CryptoKey>,
    importJWK(stored.publicJwk, KEY_ALG) as Promise<CryptoKey>
  ])
  return { kid: stored.kid, privateKey, publicKey, publicJwk: publicPart(stored.publicJwk, stored.kid) }
}

/** The key pair kept in `<dir>/keys.json`, created on first use so tokens survive restarts. */
export async function loadOrCreateKeys (dir: string = DEFAULT_KEYS_DIR): Promise<DevIdpKeys> {
  const file = join(dir, KEYS_FILE)
  const existing = await readStoredKeys(file)
  if (existing !== undefined) return await importKeys(existing)
  await mkdir(dir, { recursive: true, mode: 0o700 })
  return await importKeys(await writeStoredKeysOnce(dir, file, await generateStoredKeys()))
}
