// CONTRACT 16 "Headers are the service's own": the Link header of a collection page keeps every other
// query parameter (CONTRACT 12), percent-encoded so that no byte a client sends can end a reference or
// add a link, a relation or a parameter.
import { connect, type AddressInfo } from 'node:net'
import fc from 'fast-check'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { pageLinks, type PageLinksOf } from '../../src/http-cache/links.js'
import { build } from '../helpers/build.js'

const ADMIN = JSON.stringify({ sub: 'root-admin', role: 'Admin' })
// One entry as the service writes it: a reference without any byte that could close it or start
// another entry or parameter, then exactly one rel.
const ENTRY = /^<([^<>"\s,;]+)>; rel="(first|prev|next|last)"$/
const RELS = ['first', 'prev', 'next', 'last']

const pages: Record<string, PageLinksOf> = {
  middle: { pagination: { page: 2, totalPages: 3, nextCursor: null, prevCursor: null } },
  cursor: { pagination: { page: null, totalPages: 3, nextCursor: 'bmV4dA', prevCursor: 'cHJldg' } }
}

/** The entries of a Link header as [reference, rel], or a failure naming what does not parse. */
function entries (t: Test, header: string): Array<[string, string]> {
  return header.split(', ').map((entry) => {
    const match = ENTRY.exec(entry)
    if (match === null) t.fail(`not one link with one rel: ${JSON.stringify(entry)} in ${JSON.stringify(header)}`)
    return [match?.[1] ?? '', match?.[2] ?? '']
  })
}

/** The query parameters a request target carries, as the service's parser reads them (first value wins). */
function parameters (target: string): Record<string, string> {
  const result: Record<string, string> = {}
  for (const [name, value] of new URLSearchParams(target.includes('?') ? target.slice(target.indexOf('?') + 1) : '')) {
    if (!Object.hasOwn(result, name)) result[name] = value
  }
  return result
}

const withoutChoosers = (params: Record<string, string>) =>
  Object.fromEntries(Object.entries(params).filter(([name]) => !['page', 'after', 'before'].includes(name)))

t.test('pageLinks percent-encodes what could end a reference or add a link, and keeps the parameters', async (t) => {
  t.equal(pageLinks('/v2/movies?x=>;rel=preload;as=script,<https://evil.example/x.js', pages.middle!),
    '</v2/movies?x=%3E%3Brel=preload%3Bas=script%2C%3Chttps://evil.example/x.js&page=1>; rel="first", ' +
    '</v2/movies?x=%3E%3Brel=preload%3Bas=script%2C%3Chttps://evil.example/x.js&page=1>; rel="prev", ' +
    '</v2/movies?x=%3E%3Brel=preload%3Bas=script%2C%3Chttps://evil.example/x.js&page=3>; rel="next", ' +
    '</v2/movies?x=%3E%3Brel=preload%3Bas=script%2C%3Chttps://evil.example/x.js&page=3>; rel="last"',
    'a value that closes the reference, adds parameters and a second link stays one value')
  t.equal(pageLinks('/v2/movies?q="a b"&y=%zz&z=%41%e9&w=é&v=a+b', pages.cursor!),
    '</v2/movies?q=%22a%20b%22&y=%25zz&z=%41%e9&w=%C3%A9&v=a+b>; rel="first", ' +
    '</v2/movies?q=%22a%20b%22&y=%25zz&z=%41%e9&w=%C3%A9&v=a+b&before=cHJldg>; rel="prev", ' +
    '</v2/movies?q=%22a%20b%22&y=%25zz&z=%41%e9&w=%C3%A9&v=a+b&after=bmV4dA>; rel="next"',
    'quotes and spaces encoded, a stray % as %25, escapes and + kept as sent, other characters as UTF-8')
  t.equal(pageLinks('/v2/movies?limit=20&sort=title&genre=Sci-Fi', pages.middle!),
    '</v2/movies?limit=20&sort=title&genre=Sci-Fi&page=1>; rel="first", </v2/movies?limit=20&sort=title&genre=Sci-Fi&page=1>; rel="prev", ' +
    '</v2/movies?limit=20&sort=title&genre=Sci-Fi&page=3>; rel="next", </v2/movies?limit=20&sort=title&genre=Sci-Fi&page=3>; rel="last"',
    'an ordinary query is kept byte for byte')

  // Any text in any parameter: one rel per entry and the request's own path. Where the target is one
  // HTTP can carry (printable ASCII; Node refuses anything else in a request line), also the
  // parameters the request had as the query parser reads them, the chooser of the page aside.
  const character = fc.oneof(
    fc.constantFrom('<', '>', ';', ',', '"', ' ', '%', '%2', '%zz', '%41', '+', '=', '&', '?', '#', '\\', '\u0000', '\ud800', '\udfff', 'é', '🌧', "'", 'rel="preload"'),
    fc.string({ unit: 'binary', maxLength: 4 })
  )
  const text = fc.array(character, { maxLength: 8 }).map((parts) => parts.join(''))
  await fc.assert(fc.property(fc.array(fc.tuple(text, text), { maxLength: 4 }), fc.constantFrom('middle', 'cursor'), (pairs, kind) => {
    const query = pairs.map(([name, value]) => `${name}=${value}`).join('&')
    const target = `/v2/movies?${query}`
    const header = pageLinks(target, pages[kind]!)
    const found = entries(t, header)
    const expected = withoutChoosers(parameters(target))
    for (const [reference, rel] of found) {
      if (!reference.startsWith('/v2/movies?') && reference !== '/v2/movies') throw new Error(`${rel} leads elsewhere: ${reference}`)
      if (!/^[\x21-\x7e]*$/.test(target)) continue
      const kept = withoutChoosers(parameters(reference))
      if (JSON.stringify(kept) !== JSON.stringify(expected)) throw new Error(`${rel} changed the parameters: ${JSON.stringify(kept)} is not ${JSON.stringify(expected)}`)
    }
    if (new Set(found.map(([, rel]) => rel)).size !== found.length || !found.every(([, rel]) => RELS.includes(rel))) throw new Error(`relations: ${header}`)
  }), { seed: 20260517, numRuns: 2_000 })
  t.pass('2000 random queries: every entry is one link with one rel, to the same path, with the same parameters')
})

/** The Link header of a GET sent as raw bytes, so the target reaches the server exactly as written. */
async function rawLink (app: App, target: string): Promise<{ status: number, link: string | undefined }> {
  const { port } = app.server.address() as AddressInfo
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-test-user: ${ADMIN}\r\nConnection: close\r\n\r\n`, 'latin1')
  await closed
  const head = Buffer.concat(chunks).toString('latin1').split('\r\n\r\n', 1)[0]!.split('\r\n')
  const link = head.find((line) => line.toLowerCase().startsWith('link: '))
  return { status: Number(head[0]!.split(' ')[1]), link: link?.slice('link: '.length) }
}

t.test('every collection answers a hostile query with links to its own path, one rel each', async (t) => {
  const app = await build(t, { testAuth: true })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const hostile = 'x=>;rel=preload;as=script,<https://evil.example/x.js&y="a%20b";%zz'
  t.same(await rawLink(app, `/v2/movies?${hostile}`), {
    status: 200,
    link: '</v2/movies?x=%3E%3Brel=preload%3Bas=script%2C%3Chttps://evil.example/x.js&y=%22a%20b%22%3B%25zz&page=1>; rel="first", ' +
      '</v2/movies?x=%3E%3Brel=preload%3Bas=script%2C%3Chttps://evil.example/x.js&y=%22a%20b%22%3B%25zz&page=2>; rel="next", ' +
      '</v2/movies?x=%3E%3Brel=preload%3Bas=script%2C%3Chttps://evil.example/x.js&y=%22a%20b%22%3B%25zz&page=3>; rel="last"'
  }, 'GET /v2/movies with the bytes as sent: the exact Link')
  for (const path of ['/v2/messages', '/v2/messages/search', '/v2/users', '/v2/movies']) {
    const target = `${path}?q=needle&${hostile}&limit=1&subject=%3E%3B`
    const { status, link } = await rawLink(app, target)
    t.equal(status, 200, `${path}: 200`)
    const found = entries(t, link ?? '')
    t.same(found.map(([, rel]) => rel), path === '/v2/movies' ? ['first', 'next', 'last'] : ['first', 'last'], `${path}: the relations of page 1, one each`)
    for (const [reference, rel] of found) {
      t.equal(reference.split('?')[0], path, `${path}: ${rel} is the collection's own path`)
      t.same(withoutChoosers(parameters(reference)), withoutChoosers(parameters(target)), `${path}: ${rel} keeps every parameter as the service read it`)
    }
  }
})
