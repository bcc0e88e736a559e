import { sql, type SQL } from 'drizzle-orm'

// CONTRACT 10: %, _ and \ in a search term match themselves, not as LIKE wildcards.
const escapeLike = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`)

export function likePattern (term: string): string {
  return `%${escapeLike(term)}%`
}

// Short words ("for", "the", "of") are the most frequent words of a language, and their trigrams are
// in nearly every message: reading their posting lists costs a phrase's index scan most of its time
// and rules out almost nothing.
const SHORT_WORD = 3

/**
 * A pattern every message matching `likePattern(term)` also matches, for content's trigram index to
 * scan: runs of short words inside the term are cut down to the letters next to the longer words
 * ("badge for the kitchen" → `%badge f%e kitchen%`), keeping the trigrams that span their spaces.
 * Each kept piece is the term's own text, in order and apart, so the match implies it.
 */
export function narrowedPattern (term: string): string {
  const words = term.split(' ')
  if (!words.some((word) => word.length > SHORT_WORD)) return likePattern(term)
  const pieces: string[] = []
  let piece = ''
  for (let i = 0; i < words.length;) {
    if (words[i]!.length > SHORT_WORD) {
      piece += (i === 0 ? '' : ' ') + words[i]
      i++
      continue
    }
    let end = i
    while (end < words.length && words[end]!.length <= SHORT_WORD) end++
    const run = words.slice(i, end).join(' ')
    const before = i > 0
    const after = end < words.length
    // What is kept of the run: its first letter after a longer word, its last before one.
    const keepStart = before ? 1 : 0
    const keepEnd = after ? 1 : 0
    if (run.length - keepStart - keepEnd < 2) {
      piece += (before ? ' ' : '') + run
    } else {
      if (before) piece += ' ' + run.slice(0, 1)
      pieces.push(piece)
      piece = after ? run.slice(-1) : ''
    }
    i = end
  }
  pieces.push(piece)
  return `%${pieces.filter((p) => p !== '').map(escapeLike).join('%')}%`
}

// Content's trigram index (drizzle/0011) is over lower(content) with every space made a '0'. pg_trgm
// splits text into words at spaces, so over plain content a phrase's trigrams are those of its words
// alone, and a phrase of common words ("urgent report") finds every message holding both words
// anywhere. Joined, its trigrams run across the space ("t0r"), which few of those messages hold.
const joinedWords = (text: SQL): SQL => sql`replace(lower(${text}), ' ', '0')`

/**
 * A message whose content or subject holds the pattern (of `likePattern`), case-insensitively
 * (CONTRACT 6). On UTF-8, ILIKE compares lower() of both sides, and a substring stays a substring
 * when one character is mapped to another on both sides; so every content the ILIKE matches also
 * matches the joined form of the pattern, or of any pattern the match implies (`narrowed`), and
 * the index finds a superset, which the ILIKE beside it decides.
 */
export function termMatches (alias: string, pattern: SQL, narrowed: SQL = pattern): SQL {
  return sql`(${contentMatches(alias, pattern, narrowed)} OR ${subjectMatches(alias, pattern)})`
}

function contentMatches (alias: string, pattern: SQL, narrowed: SQL): SQL {
  const content = sql.raw(`${alias}.content`)
  return sql`(${joinedWords(content)} LIKE ${joinedWords(narrowed)} AND ${content} ILIKE ${pattern})`
}

const subjectMatches = (alias: string, pattern: SQL): SQL => sql`${sql.raw(`${alias}.subject`)} ILIKE ${pattern}`

// Whether search_term_joins (drizzle/0012) finds a join in the term: two neighbouring words of three
// characters or more. Counted in code points, as PostgreSQL counts characters; where the two could
// still disagree (a case mapping that changes a length), either way only costs time: without joins the
// trigram index serves the term, and an empty set of joins is held by every content.
export function hasWordJoins (term: string): boolean {
  const words = term.toLowerCase().split(' ')
  for (let i = 1; i < words.length; i++) {
    if ([...words[i - 1]!].length >= 3 && [...words[i]!].length >= 3) return true
  }
  return false
}

/**
 * How a term's content matches are found (`matchMode`):
 * - `joins`: the word joins' index (the term has joins, `hasWordJoins`), then the ILIKE;
 * - `trigrams`: the trigram index over the joined words, then the ILIKE;
 * - `joined`: the trigram index's own expression alone. For a term without a space or a '0', a
 *   substring of the joined words is exactly one of lower(content): the join maps only spaces to
 *   '0's, and no character of such a term can stand where either was. And on UTF-8, ILIKE is LIKE
 *   over lower() of both sides. So the ILIKE would decide nothing, and it would cost as much again per
 *   row (docs/performance.md#search-reads).
 */
export type MatchMode = 'joins' | 'trigrams' | 'joined'

export function matchMode (term: string): MatchMode {
  if (hasWordJoins(term)) return 'joins'
  return /[ 0]/.test(term) ? 'trigrams' : 'joined'
}

/**
 * The messages matching a term, as the rows of `columns` (the id and the sort key) of those whose
 * content matches and of those whose subject does. With joins, each half has an index of its own,
 * and apart the index decides its half before any row is read: in one OR, every candidate row would
 * compute its word joins again. Otherwise one OR of both: one scan of the table's pages and no
 * duplicates to remove, where two halves read the pages twice and a UNION sorts out the rows both
 * found. Parameters: pattern (`likePattern`), narrowed (`narrowedPattern`), term.
 */
export function matchingRowsSql (alias: string, columns: SQL, where: SQL, mode: MatchMode, params: { pattern: SQL, narrowed: SQL, term: SQL }): SQL {
  const content = sql.raw(`${alias}.content`)
  const from = sql`FROM messages ${sql.raw(alias)}`
  const subject = subjectMatches(alias, params.pattern)
  if (mode === 'joins') {
    return sql`SELECT ${columns} ${from} WHERE (message_word_joins(${content}) @> search_term_joins(${params.term}) AND ${content} ILIKE ${params.pattern})${where}
    UNION SELECT ${columns} ${from} WHERE ${subject}${where}`
  }
  const matches = mode === 'joined'
    ? sql`${joinedWords(content)} LIKE ${joinedWords(params.pattern)}`
    : contentMatches(alias, params.pattern, params.narrowed)
  return sql`SELECT ${columns} ${from} WHERE (${matches} OR ${subject})${where}`
}
