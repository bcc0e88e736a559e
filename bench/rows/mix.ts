/**
 * The random mix (issue: memory under a load test): MIX_SECONDS of list pages in every sort and order,
 * unfiltered or filtered by priority, author or subject, at a random page of what the filter leaves,
 * and searches for rare phrases and for the seeded words at random pages. Fixed seed, the same for
 * every run; paths repeat as they would in a real load test, so caches fill and are used. Its figure
 * is the service's peak RSS.
 */
import { rarePhrases, SEARCH_WORDS, SUBJECTS } from '../../scripts/seed.js'
import { createRandom } from '../../scripts/seeded-random.js'
import { expectPath } from '../checks/answer-checks.js'
import type { Oracle } from '../checks/reference-sql.js'
import { pageQuery } from '../checks/path-queries.js'
import { COLD_LIMIT, COLD_SEED } from './cold.js'
import { requireOracle, type RowBuilder } from './row.js'

const MIX_SECONDS = 120
const MIX_PATHS = 200_000
const MIX_AUTHORS = 50
const PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const
const SORTS = ['id', 'createdAt', 'priority', 'subject'] as const

/** The mix's paths, drawn with the fixed seed. */
async function mixPaths (oracle: Oracle): Promise<string[]> {
  const random = createRandom(COLD_SEED + 1)
  const pick = <T> (items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  const authors = (await oracle.rows<{ id: string }>(`select id from users order by id limit ${MIX_AUTHORS}`)).map((r) => r.id)
  const totals = new Map<string, number>()
  // Pages of a filter or term: its total from the oracle, read once.
  const pagesOf = async (path: string): Promise<number> => {
    let total = totals.get(path)
    if (total === undefined) {
      total = await oracle.count(pageQuery(path).where)
      totals.set(path, total)
    }
    return Math.max(1, Math.ceil(total / COLD_LIMIT))
  }
  const phrases = rarePhrases()
  const words = Object.keys(SEARCH_WORDS)
  const paths: string[] = []
  for (let i = 0; i < MIX_PATHS; i++) {
    const order = `&sort=${pick(SORTS)}&order=${random() < 0.5 ? 'asc' : 'desc'}&limit=${COLD_LIMIT}`
    const kind = random()
    if (kind < 0.3) {
      paths.push(`/v2/messages/search?q=${encodeURIComponent(pick(phrases))}&page=1&limit=${COLD_LIMIT}`)
    } else if (kind < 0.4) {
      const base = `/v2/messages/search?q=${pick(words)}`
      paths.push(`${base}&page=${1 + Math.floor(random() * await pagesOf(base))}${order}`)
    } else {
      const filter = random()
      const base = filter < 0.4
        ? '/v2/messages?'
        : filter < 0.6
          ? `/v2/messages?priority=${pick(PRIORITIES)}`
          : filter < 0.8 ? `/v2/messages?authorId=${pick(authors)}` : `/v2/messages?subject=${encodeURIComponent(pick(SUBJECTS))}`
      paths.push(`${base}&page=${1 + Math.floor(random() * await pagesOf(base))}${order}`)
    }
  }
  return paths
}

export const mixRow: RowBuilder = async ({ oracle: reader, wanted }) => {
  if (!wanted('mix')) return []
  const oracle = requireOracle(reader, 'mix')
  const paths = await mixPaths(oracle)
  return [{
    key: 'mix',
    name: `random mix for ${MIX_SECONDS} s: pages of every sort and filter, rare and common search terms`,
    targets: ['service'],
    requests: () => [],
    duration: MIX_SECONDS,
    sequence: { paths, expect: async (path) => await expectPath(oracle, path), repeat: true, sampleEvery: 500 }
  }]
}
