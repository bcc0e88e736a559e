/** Mobile clients (CONTRACT 12): page 1 revalidated, page 1 gzipped, a cursor page; each measured against page 1 of this run. */
import { request } from 'undici'
import { parseJson, type Answers, type Item } from '../checks/answer-checks.js'
import { BenchError } from '../run/bench-error.js'
import { int } from '../report/bench-report.js'
import type { Server } from '../servers/child-servers.js'
import type { Row, RowBuilder } from './row.js'

const PAGE_1 = '/v2/messages?page=1&limit=25'
// The requests made while the rows are built are bounded too: a target may be slow to answer.
const TIMEOUT_MS = 30_000

/** The bytes a response puts on the wire as it is and in `encoding` (undici does not decode them). */
async function wireBytes (base: string, path: string, encoding: string): Promise<{ identity: number, encoded: number }> {
  const size = async (headers: Record<string, string>): Promise<number> => {
    const response = await request(base + path, { headers, signal: AbortSignal.timeout(TIMEOUT_MS) })
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

async function gzipRow (service: Server): Promise<Row> {
  const sizes = await wireBytes(service.base, PAGE_1, 'gzip')
  return {
    key: 'gzip-25',
    name: `page 1, limit 25, Accept-Encoding: gzip (${int(sizes.identity)} → ${int(sizes.encoded)} bytes)`,
    targets: ['service'],
    requests: () => [{ method: 'GET', path: PAGE_1, headers: { 'accept-encoding': 'gzip' } }],
    reference: { key: 'page1-25', target: 0.8 }
  }
}

/**
 * The page after the middle page, asked by the middle page's nextCursor: the ids of the next page by
 * offset (on a target, ids in order after the middle page's last, as many as the limit or the rest).
 */
async function cursorRow (answers: Answers, service: Server, total: number): Promise<Row> {
  const middle = Math.ceil(Math.max(1, Math.ceil(total / 25)) / 2)
  const at = await (await fetch(`${service.base}/v2/messages?page=${middle}&limit=25`, { signal: AbortSignal.timeout(TIMEOUT_MS) })).json() as { data: Item[], pagination: { nextCursor?: string | null } }
  const cursor = at.pagination.nextCursor
  if (typeof cursor !== 'string') throw new BenchError(`page ${middle} has no nextCursor`)
  const next = await answers.expect(`/v2/messages?page=${middle + 1}&limit=25`)
  const after = Number(at.data[at.data.length - 1]?.id ?? 0)
  const idsProblem = (got: number[]): string | undefined => {
    if (answers.exact) return got.join(',') === next.ids.join(',') ? undefined : `ids ${got.slice(0, 3).join(',')}… are not ${next.ids.slice(0, 3).join(',')}…`
    if (got.length === 0 || got.length > 25) return `${got.length} items`
    return got.every((id, i) => id > (i === 0 ? after : got[i - 1]!)) ? undefined : `ids ${got.slice(0, 3).join(',')}… are not in order after ${after}`
  }
  return {
    key: 'cursor-25',
    name: `cursor page after page ${middle}, limit 25`,
    targets: ['service'],
    requests: () => [{ method: 'GET', path: `/v2/messages?limit=25&after=${encodeURIComponent(cursor)}` }],
    verify: (b) => idsProblem(((parseJson(b) as { data?: Item[] } | undefined)?.data ?? []).map((m) => Number(m.id))),
    reference: { key: 'page1-25', target: 0.8 }
  }
}

export const mobileRows: RowBuilder = async ({ answers, wanted, service, total }) => {
  if (!wanted('revalidate-25') && !wanted('gzip-25') && !wanted('cursor-25')) return []
  const first = await fetch(`${service.base}${PAGE_1}`, { signal: AbortSignal.timeout(TIMEOUT_MS) })
  const tag = first.headers.get('etag') ?? ''
  await first.arrayBuffer()
  const rows: Row[] = []
  if (wanted('revalidate-25')) rows.push(revalidateRow(tag))
  if (wanted('gzip-25')) rows.push(await gzipRow(service))
  if (wanted('cursor-25')) rows.push(await cursorRow(answers, service, total))
  return rows
}
