import { sql, type SQL } from 'drizzle-orm'
import type { CollectionSpec, FilterValues, RankedDim } from './spec.js'

// A page's filters: the condition they put on the rows, the counter that holds the total of the rows
// they match (when one does: drizzle/0006 counts each value of a counted filter), and whether the
// order-statistic buckets rank the rows they match.

export function whereSql<S extends string, F extends string> (spec: CollectionSpec<S, F>, present: F[]): SQL {
  const conditions = present.map((name) => spec.filters[name].condition)
  return conditions.length === 0 ? sql`true` : sql.join(conditions, sql` AND `)
}

/** Whether the counters hold the total of the rows these filters match (none, or one with a counter key). */
export function counted<S extends string, F extends string> (spec: CollectionSpec<S, F>, present: F[]): boolean {
  return present.length === 0 || (present.length === 1 && spec.filters[present[0]!].key !== undefined)
}

export function counterKey<S extends string, F extends string> (spec: CollectionSpec<S, F>, present: F[], values: FilterValues<F>): string {
  if (present.length === 0) return ''
  const name = present[0]!
  return spec.filters[name].key?.(values[name]!) ?? ''
}

/** The dimension that locates this page, when the sort has one and the filters allow it. */
export function rankedDim<S extends string, F extends string> (spec: CollectionSpec<S, F>, sort: S, present: F[]): RankedDim | undefined {
  const dim = spec.ranked.dims[sort]
  if (dim === undefined) return undefined
  if (present.length === 0) return dim
  return present.length === 1 && present[0] === spec.ranked.filter ? dim : undefined
}

/** The filters present, or null when one of them can match no row at all. */
export function presentFilters<S extends string, F extends string> (spec: CollectionSpec<S, F>, values: FilterValues<F>): F[] | null {
  const present: F[] = []
  for (const name of Object.keys(spec.filters) as F[]) {
    const value = values[name]
    if (value === undefined) continue
    if (spec.filters[name].matchesNothing?.(value) === true) return null
    present.push(name)
  }
  return present
}

/** The placeholders of a page statement: the counter key, and each present filter's value. */
export function filterParams<S extends string, F extends string> (spec: CollectionSpec<S, F>, present: F[], values: FilterValues<F>): Record<string, unknown> {
  const params: Record<string, unknown> = { key: counterKey(spec, present, values) }
  for (const name of present) params[name] = values[name]
  return params
}
