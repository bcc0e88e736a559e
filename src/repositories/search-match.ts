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
  const content = sql.raw(`${alias}.content`)
  const subject = sql.raw(`${alias}.subject`)
  return sql`((${joinedWords(content)} LIKE ${joinedWords(narrowed)} AND ${content} ILIKE ${pattern}) OR ${subject} ILIKE ${pattern})`
}
