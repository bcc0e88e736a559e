// CONTRACT 16: the request target is rewritten before routing into a well-formed URI: its
// percent-encoding UTF-8, as a browser's URL parser reads it, and no character a URI cannot hold raw.
// What was well-formed is left byte for byte.
import fc from 'fast-check'
import t from 'tap'
import { wellFormedUrl } from '../../src/http/well-formed-url.js'

// A URI reference as RFC 3986 writes one: these characters, or percent-encoded octets.
const URI = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*$/

t.test('malformed escapes become U+FFFD, a stray % becomes %25, raw characters a URI cannot hold are encoded', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['/v2/input/users/%ED%A0%80', '/v2/input/users/%EF%BF%BD%EF%BF%BD%EF%BF%BD', 'an encoded surrogate: one U+FFFD per byte, as WHATWG decodes it'],
    ['/v2/input/users/%zz', '/v2/input/users/%25zz', 'a stray %'],
    ['/a/%', '/a/%25', 'a % at the end'],
    ['/a/%2', '/a/%252', 'a % with one hex digit'],
    ['/a/%FF%2F%41b', '/a/%EF%BF%BD%2F%41b', 'an invalid byte beside encoded ASCII: the ASCII keeps its escapes'],
    ['/a/%C3%A9%C3', '/a/%C3%A9%EF%BF%BD', 'a character cut short at the end'],
    ['/a/%F0%9F%8C%A7?q=%e2%9d%84&x=%%32%35', '/a/%F0%9F%8C%A7?q=%e2%9d%84&x=%25%32%35', 'valid escapes are kept as sent, lower case included'],
    ['/v2/messages?subject=a%00b', '/v2/messages?subject=a%00b', 'NUL is well-formed UTF-8: its own rule answers it'],
    ['/v2/movies?genre=Drama&limit=5', '/v2/movies?genre=Drama&limit=5', 'nothing to do'],
    ["/a/b;c,d!$&'()*+=:@?x=/?", "/a/b;c,d!$&'()*+=:@?x=/?", 'every delimiter a path or a query may hold raw stays'],
    ['/api-docs/static/index.html?a=<x>"y"', '/api-docs/static/index.html?a=%3Cx%3E%22y%22', 'angle brackets and quotes'],
    ['/a?q=[1]{2}|\\^`#', '/a?q=%5B1%5D%7B2%7D%7C%5C%5E%60%23', 'brackets, braces, bar, backslash, caret, backtick, hash'],
    ['/a b?c=é 🌧', '/a%20b?c=%C3%A9%20%F0%9F%8C%A7', 'what inject can send and HTTP cannot: spaces and other characters, as UTF-8'],
    ['/a?c=\ud800', '/a?c=%EF%BF%BD', 'a lone surrogate from inject: U+FFFD']
  ]
  for (const [url, expected, name] of cases) t.equal(wellFormedUrl(url), expected, name)
})

t.test('any target: the result is a URI, is the target itself when that was one, and reads as the same query', async (t) => {
  const piece = fc.oneof(
    fc.constantFrom('%', '%%', '%2', '%zz', '%ED%A0%80', '%C0%AF', '%FF', '%E2%82', '%F4%90%80%80', '%41', '%2F', '%25', '%e9', '%C3%A9', '/', '?', '&', '=', '+', 'a'),
    fc.uint8Array({ minLength: 1, maxLength: 4 }).map((bytes) => [...bytes].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('')),
    fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 4 })
  )
  const target = fc.array(piece, { maxLength: 12 }).map((pieces) => `/p/${pieces.join('')}`)
  const decodes = (text: string): boolean => {
    try {
      decodeURIComponent(text)
      return true
    } catch {
      return false
    }
  }
  fc.assert(fc.property(target, (url) => {
    const rewritten = wellFormedUrl(url)
    if (!URI.test(rewritten) || !decodes(rewritten)) throw new Error(`${rewritten} is not a well-formed URI`)
    if (URI.test(url) && decodes(url) && rewritten !== url) throw new Error(`${url} was well-formed and became ${rewritten}`)
    const query = (text: string) => JSON.stringify([...new URLSearchParams(text.slice(text.indexOf('?') + 1))])
    if (url.includes('?') && query(rewritten) !== query(url)) throw new Error(`${url}: the query reads ${query(rewritten)}, not ${query(url)}`)
  }), { seed: 20260517, numRuns: 5_000 })
  t.pass('5000 targets')
})
