/**
 * What a list or search path asks for, as the plain query that answers it: the WHERE of its filters and
 * term, the ORDER BY of its sort (the key, then id ascending, as CONTRACT 7 orders ties), and its page.
 * The cold rows and the random mix check their sampled answers against it.
 */
import type { Where } from './reference-sql.js'

export interface PageQuery { where: Where, orderBy: string, page: number, limit: number }

const COLUMNS: Record<string, string> = { id: 'id', createdAt: 'created_at', priority: 'priority', subject: 'subject' }
const FILTERS: Array<[param: string, sql: string]> = [['priority', 'priority = $::message_priority'], ['authorId', 'author_id = $::bigint'], ['subject', 'subject = $']]

export function pageQuery (path: string): PageQuery {
  const url = new URL(path, 'http://bench')
  const params = url.searchParams
  const conditions: string[] = []
  const values: unknown[] = []
  const term = params.get('q')
  if (url.pathname.endsWith('/search') && term !== null) {
    values.push(`%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`)
    conditions.push(`(content ilike $${values.length} or subject ilike $${values.length})`)
  }
  for (const [param, sql] of FILTERS) {
    const value = params.get(param)
    if (value === null) continue
    values.push(value)
    conditions.push(sql.replace('$', `$${values.length}`))
  }
  const sort = params.get('sort') ?? 'id'
  const column = COLUMNS[sort]
  if (column === undefined) throw new Error(`no sort ${sort}`)
  const direction = params.get('order') === 'desc' ? ' desc' : ''
  return {
    where: { text: conditions.length === 0 ? 'true' : conditions.join(' and '), params: values },
    orderBy: sort === 'id' ? `id${direction}` : `${column}${direction}, id`,
    page: Number(params.get('page') ?? 1),
    limit: Number(params.get('limit') ?? 25)
  }
}
