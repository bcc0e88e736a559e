/**
 * The Platformatic DB peer of the load benchmark (bench/platformatic/, docs/performance.md): how a row's
 * request to the service is asked of Platformatic's generated REST API, and how its answers are checked.
 * Pure functions, no I/O.
 *
 * Platformatic DB 2.61 answers `GET /messages` with a bare array of rows (bigint columns as strings) and,
 * with `totalCount=true`, the number of matching rows in an `X-Total-Count` header. Pages are
 * `limit`/`offset`, filters `where.<field>.<op>=`, alternatives `where.or=(<field>.<op>=<value>|...)`,
 * sorting `orderby.<field>=asc|desc` in the order given.
 */

/** The service's sort keys; Platformatic names the columns the same way (camelCase). */
const SORTS = new Set(['id', 'createdAt', 'priority', 'subject'])
/** The service's list filters, each an equality on the column of the same camelCase name. */
const FILTERS = ['priority', 'authorId', 'subject']

/**
 * The Platformatic request equivalent to a service list or search path: the same page, filters, order
 * and term. A search term is matched with ILIKE on content or subject, as the service matches it, with
 * `\`, `%` and `_` escaped so that they match themselves (CONTRACT 10). Platformatic's `where.or` parser
 * splits on `|` and `=` and has no escape for them, so a term holding either cannot be asked: an error.
 */
export function platformaticPath (path: string): string {
  const url = new URL(path, 'http://bench')
  const query = url.searchParams
  if (url.pathname !== '/v2/messages' && url.pathname !== '/v2/messages/search') throw new Error(`no Platformatic equivalent of ${url.pathname}`)
  const page = Math.max(1, Math.trunc(Number(query.get('page') ?? 1)) || 1)
  const limit = Math.min(100, Math.max(1, Math.trunc(Number(query.get('limit') ?? 25)) || 25))
  const out = new URLSearchParams({ limit: String(limit), offset: String((page - 1) * limit), totalCount: 'true' })
  for (const filter of FILTERS) {
    const value = query.get(filter)
    if (value !== null) out.set(`where.${filter}.eq`, value)
  }
  if (url.pathname.endsWith('/search')) {
    const term = query.get('q') ?? ''
    if (term.trim() === '') throw new Error('a search needs a term')
    if (/[|=]/.test(term)) throw new Error(`Platformatic's where.or cannot carry "|" or "=" (term ${JSON.stringify(term)})`)
    const pattern = `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
    out.set('where.or', `(content.ilike=${pattern}|subject.ilike=${pattern})`)
  }
  const sort = query.get('sort') ?? 'id'
  if (!SORTS.has(sort)) throw new Error(`no sort ${sort}`)
  const order = query.get('order') === 'desc' ? 'desc' : 'asc'
  out.set(`orderby.${sort}`, order)
  // Ties in the sort key go by id ascending, as the service orders them (CONTRACT 7).
  if (sort !== 'id') out.set('orderby.id', 'asc')
  return `/messages?${out.toString()}`
}

/** What a page must be: its total for the filters and the exact ids, from the oracle; `items` checks their content. */
export interface ExpectedPage {
  total: number
  ids: number[]
  items?: (data: Array<Record<string, unknown>>) => string | undefined
}

/** Checks one Platformatic page answer: the exact ids in order and the total in X-Total-Count. A problem, or undefined. */
export function platformaticPageProblem (body: string, headers: Record<string, string | undefined>, expect: ExpectedPage): string | undefined {
  let data: unknown
  try {
    data = JSON.parse(body)
  } catch {
    return `body is not JSON: ${body.slice(0, 80)}`
  }
  if (!Array.isArray(data)) return `not an array of rows: ${body.slice(0, 80)}`
  const header = headers['x-total-count']
  if (header === undefined) return 'no X-Total-Count header'
  if (Number(header) !== expect.total) return `X-Total-Count is ${header}, expected ${expect.total}`
  const items = data as Array<Record<string, unknown>>
  const ids = items.map((item) => Number(item.id))
  if (ids.join(',') !== expect.ids.join(',')) return `ids ${ids.slice(0, 3).join(',')}… are not the expected ${expect.ids.slice(0, 3).join(',')}… (${ids.length} of ${expect.ids.length})`
  return expect.items?.(items)
}

/**
 * The body Platformatic is sent for one of the service's POST bodies. Platformatic has no local users: the
 * author is not taken from the token but named in the body (`authorId`, a bigint, so a string). Its input
 * schema requires every NOT NULL column, `priority` included, although the column has a default; a body
 * without one gets the service's default, `normal`.
 */
export function platformaticPostBody (serviceBody: string, authorId: number): string {
  const message = JSON.parse(serviceBody) as Record<string, unknown>
  return JSON.stringify({ ...message, priority: message.priority ?? 'normal', authorId: String(authorId) })
}

/** Checks a created message as Platformatic answers it: the row with its id (a string of digits) and content. */
export function platformaticMessageProblem (body: string): string | undefined {
  let item: Record<string, unknown> | undefined
  try {
    item = JSON.parse(body) as Record<string, unknown>
  } catch {}
  return typeof item?.id === 'string' && /^\d+$/.test(item.id) && typeof item.content === 'string' ? undefined : `not a message: ${body.slice(0, 60)}`
}
