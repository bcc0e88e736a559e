import { generateKeyPairSync } from 'node:crypto'
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { Agent } from 'undici'
import { fetchKeySet, KeyLookupError, MAX_KEY_SET_BYTES, MAX_KEYS, parseKeySet } from '../../src/auth/key-set.js'
import { startRecorder } from '../helpers/idp.js'

// What a key set may hold and how much of one is read: the parsing on its own, then one fetch
// against a real loopback server answering exactly the bytes each case needs.

interface RsaKey { jwk: Record<string, unknown>, pem: string }

function rsaKey (kid?: string, modulusLength = 2048): RsaKey {
  const { publicKey } = generateKeyPairSync('rsa', { modulusLength })
  const { n, e } = publicKey.export({ format: 'jwk' })
  return { jwk: { kty: 'RSA', n, e, alg: 'RS256', use: 'sig', ...(kid === undefined ? {} : { kid }) }, pem: publicKey.export({ type: 'spki', format: 'pem' }).toString() }
}

const k1 = rsaKey('k1')
const k2 = rsaKey('k2')
const ecJwk = { ...generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' }), kid: 'ec', alg: 'ES256', use: 'sig' }
const set = (...keys: unknown[]): string => JSON.stringify({ keys })
const kidsOf = (text: string): Record<string, string> => Object.fromEntries(parseKeySet(text).byKid)

function refused (t: Test, text: string, message: string): void {
  t.throws(() => parseKeySet(text), new KeyLookupError(message))
}

t.test('every RS256 signing key is read, by kid, as the SPKI PEM node:crypto exports', async (t) => {
  const parsed = parseKeySet(set(k1.jwk, k2.jwk))
  t.same(Object.fromEntries(parsed.byKid), { k1: k1.pem, k2: k2.pem })
  t.equal(parsed.onlyKey, undefined, 'two keys: no key for a token without kid')
  t.same(parseKeySet(set(k1.jwk)).onlyKey, k1.pem, 'one key: it is the key for a token without kid')
  const { alg, use, ...bare } = k1.jwk
  t.same(kidsOf(set(bare)), { k1: k1.pem }, 'alg and use may be left out')
  t.same(kidsOf(set({ ...k1.jwk, key_ops: ['verify'], x5c: ['MIIB'], extra: { any: 'thing' } })), { k1: k1.pem }, 'other members are ignored')
})

t.test('keys that are not RS256 signing keys are left out, and do not count for a token without kid', async (t) => {
  const others = [
    ecJwk,
    { kty: 'oct', k: 'c2VjcmV0', kid: 'hmac', alg: 'HS256' },
    { ...k2.jwk, kid: 'rs384', alg: 'RS384' },
    { ...k2.jwk, kid: 'ps256', alg: 'PS256' },
    { ...k2.jwk, kid: 'enc', use: 'enc' },
    { ...k2.jwk, kid: 'ops', key_ops: ['encrypt'] },
    { ...k2.jwk, kid: 'ops-string', key_ops: 'verify' },
    { ...k2.jwk, kid: 'private', d: 'AQAB' },
    { ...k2.jwk, kid: 42 },
    { ...k2.jwk, kid: 'no-n', n: undefined },
    { ...k2.jwk, kid: 'bad-n', n: 42 },
    { ...k2.jwk, kid: 'junk-n', n: '!!!' },
    { ...rsaKey('rsa-1024', 1024).jwk }
  ]
  const parsed = parseKeySet(set(...others, k1.jwk))
  t.same(Object.fromEntries(parsed.byKid), { k1: k1.pem })
  t.equal(parsed.onlyKey, k1.pem, 'still exactly one RS256 signing key')
})

t.test('a kid that names two different keys names neither; the same key twice is one key', async (t) => {
  const twice = parseKeySet(set(k1.jwk, { ...k2.jwk, kid: 'k1' }))
  t.same(Object.fromEntries(twice.byKid), {})
  t.equal(twice.onlyKey, undefined, 'two keys')
  const same = parseKeySet(set(k1.jwk, k1.jwk))
  t.same(Object.fromEntries(same.byKid), { k1: k1.pem })
  t.equal(same.onlyKey, k1.pem)
})

t.test('a key without kid counts for a token without kid only', async (t) => {
  const lone = rsaKey()
  const parsed = parseKeySet(set(lone.jwk))
  t.same(Object.fromEntries(parsed.byKid), {})
  t.equal(parsed.onlyKey, lone.pem)
  t.equal(parseKeySet(set(lone.jwk, k1.jwk)).onlyKey, undefined)
})

t.test('an empty key set is a key set: it holds no key', async (t) => {
  t.same(parseKeySet(set()), { byKid: new Map(), onlyKey: undefined })
})

t.test('what is not a key set is refused whole', async (t) => {
  refused(t, '<html>not json</html>', 'key set is not JSON')
  refused(t, '', 'key set is not JSON')
  for (const body of ['null', '[]', '"keys"', '{}', '{"keys":null}', '{"keys":{}}', '{"keys":"k1"}', set(k1.jwk, 'k2'), set(k1.jwk, null), set([k1.jwk])]) {
    refused(t, body, 'not a key set')
  }
})

t.test(`a key set listing more than ${MAX_KEYS} keys is refused whole`, async (t) => {
  const others = (count: number): unknown[] => Array.from({ length: count }, (_, i) => ({ ...ecJwk, kid: `ec${i}` }))
  t.same(kidsOf(set(...others(MAX_KEYS - 1), k1.jwk)), { k1: k1.pem }, `${MAX_KEYS} keys are read`)
  refused(t, set(...others(MAX_KEYS), k1.jwk), `key set lists more than ${MAX_KEYS} keys`)
})

/** A loopback server whose one route runs `answer`; closed when the test ends. */
async function serve (t: Test, answer: (res: ServerResponse) => void): Promise<string> {
  const server = createServer((_req, res) => answer(res))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`
}

async function fetchFrom (t: Test, url: string): Promise<ReturnType<typeof parseKeySet>> {
  const dispatcher = new Agent()
  t.teardown(() => dispatcher.close())
  return await fetchKeySet(url, dispatcher, 5000)
}

t.test('fetchKeySet: a 200 with a key set is read', async (t) => {
  const url = await serve(t, (res) => res.writeHead(200, { 'content-type': 'application/json' }).end(set(k1.jwk)))
  t.same(Object.fromEntries((await fetchFrom(t, url)).byKid), { k1: k1.pem })
})

t.test(`fetchKeySet: a body over ${MAX_KEY_SET_BYTES} bytes is refused, also when it never says its length`, async (t) => {
  const padded = (bytes: number): string => {
    const text = set(k1.jwk)
    return `${text.slice(0, -1)},"padding":"${'x'.repeat(bytes - text.length - 13)}"}`
  }
  t.equal(Buffer.byteLength(padded(MAX_KEY_SET_BYTES)), MAX_KEY_SET_BYTES)
  const atLimit = await serve(t, (res) => res.writeHead(200).end(padded(MAX_KEY_SET_BYTES)))
  t.same(Object.fromEntries((await fetchFrom(t, atLimit)).byKid), { k1: k1.pem }, 'exactly the limit is read')
  const over = await serve(t, (res) => res.writeHead(200).end(padded(MAX_KEY_SET_BYTES + 1)))
  await t.rejects(fetchFrom(t, over), new KeyLookupError(`key set is larger than ${MAX_KEY_SET_BYTES} bytes`))
  // Chunked, without content-length, and endless: reading stops at the limit.
  let written = 0
  const endless = await serve(t, (res) => {
    res.writeHead(200)
    const more = (): void => {
      while (!res.destroyed && written < 64 * MAX_KEY_SET_BYTES) {
        written += 16_384
        if (!res.write(' '.repeat(16_384))) {
          res.once('drain', more)
          return
        }
      }
    }
    more()
  })
  await t.rejects(fetchFrom(t, endless), new KeyLookupError(`key set is larger than ${MAX_KEY_SET_BYTES} bytes`))
  t.ok(written < 64 * MAX_KEY_SET_BYTES, 'the server was not read to its end')
})

t.test('fetchKeySet: anything but a 200 is a failure, and a redirect is never followed', async (t) => {
  const recorder = await startRecorder(t)
  for (const status of [201, 204, 301, 302, 304, 401, 404, 500, 503]) {
    const url = await serve(t, (res) => res.writeHead(status, { location: `${recorder.url}/.well-known/jwks.json` }).end(status === 204 || status === 304 ? undefined : set(k1.jwk)))
    await t.rejects(fetchFrom(t, url), new KeyLookupError(`key set answered ${status}`), `${status}`)
  }
  t.equal(recorder.count, 0, 'the redirect target received no request')
})
