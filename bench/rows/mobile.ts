/** Mobile clients (CONTRACT 12): page 1 revalidated, page 1 gzipped, a cursor page; each measured against page 1 of this run. */
import { request } from 'undici'
import { parseJson, type Item } from '../checks/answer-checks.js'
import { BenchError } from '../run/bench-error.js'
import { EVERYTHING, type Oracle } from '../checks/reference-sql.js'
import { int } from '../report/bench-report.js'
import type { Child } from '../servers/child-servers.js'
import type { Row, RowBuilder } from './row.js'

const PAGE_1 = '/v2/messages?page=1&limit=25'

/** The bytes a response puts on the wire as it is and in `encoding` (undici does not decode them). */
async function wireBytes (base: string, path: string, encoding: string): Promise<{ identity: number, encoded: number }> {
  const size = async (headers: Record<string, string>): Promise<number> => {
    const response = await request(base + path, { headers })
    return (await response.body.arrayBuffer()).byteLength
  }
  return { identity: await size({}), encoded: await size({ 'accept-encoding': encoding }) }
}

function revalidateRow (tag: string): Row {
  return {
    key: 'revalidate-25',
    name: 'page 1, limit 25, revalidated (If-None-Match → 304)',
    targets: ['service'],
    requests: () => [{ method: 'GET', path: PAGE_1, headers: { 'if-none-match': tag } }],
    verify: (b) => b === '' ? undefined : `a body on a 304: ${b.slice(0, 40)}`,
    alsoOk: [304],
    reference: { key: 'page1-25', target: 1.2 }
  }
}

async function gzipRow (service: Child): Promise<Row> {
  const sizes = await wireBytes(service.base, PAGE_1, 'gzip')
  return {
    key: 'gzip-25',
    name: `page 1, limit 25, Accept-Encoding: gzip (${int(sizes.identity)} → ${int(sizes.encoded)} bytes)`,
    targets: ['service'],
    requests: () => [{ method: 'GET', path: PAGE_1, headers: { 'accept-encoding': 'gzip' } }],
    reference: { key: 'page1-25', target: 0.8 }
  }
}

/** The page after the middle page, asked by the middle page's nextCursor. */
async function cursorRow (oracle: Oracle, service: Child, total: number): Promise<Row> {
  const middle = Math.ceil(Math.max(1, Math.ceil(total / 25)) / 2)
  const at = await (await fetch(`${service.base}/v2/messages?page=${middle}&limit=25`)).json() as { pagination: { nextCursor?: string | null } }
  const cursor = at.pagination.nextCursor
  if (typeof cursor !== 'string') throw new BenchError(`page ${middle} has no nextCursor`)
  const ids = await oracle.ids(EVERYTHING, 'id', 25, middle * 25)
  return {
    key: 'cursor-25',
    name: `cursor page after page ${middle}, limit 25`,
    targets: ['service'],
    requests: () => [{ method: 'GET', path: `/v2/messages?limit=25&after=${encodeURIComponent(cursor)}` }],
    verify: (b) => {
      const got = ((parseJson(b) as { data?: Item[] } | undefined)?.data ?? []).map((m) => Number(m.id))
      return got.join(',') === ids.join(',') ? undefined : `ids ${got.slice(0, 3).join(',')}… are not ${ids.slice(0, 3).join(',')}…`
    },
    reference: { key: 'page1-25', target: 0.8 }
  }
}

export const mobileRows: RowBuilder = async ({ oracle, wanted, service, total }) => {
  if (!wanted('revalidate-25') && !wanted('gzip-25') && !wanted('cursor-25')) return []
  const first = await fetch(`${service.base}${PAGE_1}`)
  const tag = first.headers.get('etag') ?? ''
  await first.arrayBuffer()
  const rows: Row[] = []
  if (wanted('revalidate-25')) rows.push(revalidateRow(tag))
  if (wanted('gzip-25')) rows.push(await gzipRow(service))
  if (wanted('cursor-25')) rows.push(await cursorRow(oracle, service, total))
  return rows
}
