import { sql } from 'drizzle-orm'
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { likePattern } from '../../src/search/match.js'
import { type Message } from '../../src/schemas/messages.js'
import { hasWordJoins, matchingRowsSql, matchMode, narrowedPattern, termMatches } from '../../src/search/match.js'
import { build } from '../helpers/build.js'
import { createAuthor, createMessages, queryRows } from '../helpers/fixtures.js'
import { cursorKinds, pageBody, pagination } from '../helpers/pagination.js'

// The search indexes' storage parameters (drizzle/0014): new messages wait in pending lists of up to 32 MB.
const PENDING_LISTS = " WITH (fastupdate='on', gin_pending_list_limit='32768')"

const MISSING_Q = { status: 400, body: { error: 'Missing required query parameter: q' } }

interface Reply { status: number, body: any }

async function get (app: App, url: string): Promise<Reply> {
  const res = await app.inject({ method: 'GET', url })
  return { status: res.statusCode, body: cursorKinds(res.json()) }
}

const search = (q: string, rest = ''): string => `/v2/messages/search?q=${encodeURIComponent(q)}${rest === '' ? '' : `&${rest}`}`

// Created through the API, so the search reads what POST wrote.
async function createMessage (t: Test, app: App, content: string, extra: { subject?: string, priority?: string } = {}, sub = 'alice'): Promise<Message> {
  const res = await app.inject({ method: 'POST', url: '/v2/messages', headers: { 'x-test-user': JSON.stringify({ sub, role: 'User' }) }, payload: { content, ...extra } })
  t.equal(res.statusCode, 201, `created ${JSON.stringify(content)}`)
  return res.json()
}

t.test('GET /v2/messages/search', async (t) => {
  const app = await build(t, { testAuth: true })
  const alice = await createAuthor(app, 'alice', { name: 'Alice' })
  const bob = await createAuthor(app, 'bob', { name: 'Bob' })

  const create = async (content: string, extra: { subject?: string, priority?: string } = {}, sub = 'alice') => await createMessage(t, app, content, extra, sub)

  const percent = await create('100% done')
  const percentWord = await create('100 percent done')
  const underscore = await create('snake_case names')
  const notUnderscore = await create('snakeXcase names')
  const backslash = await create('path C:\\temp\\dir')
  const noBackslash = await create('path C:tempdir')
  const upper = await create('DEPLOY FINISHED', { priority: 'high' })
  const mixed = await create('the Deploy went fine', { subject: 'Ops', priority: 'low' })
  const bySubject = await create('nothing to see', { subject: 'Deploy report', priority: 'high' }, 'bob')
  const subjectOnly = await create('plain body', { subject: 'Quarterly NUMBERS' })
  const plain = await create('unrelated text')

  t.test('matching', async (t) => {
    const cases: Array<[string, string, Message[]]> = [
      ['case-insensitive on content', 'deploy', [upper, mixed, bySubject]],
      ['case-insensitive, upper-case query', 'DEPLOY', [upper, mixed, bySubject]],
      ['a substring in the middle of a word', 'ploy', [upper, mixed, bySubject]],
      ['subject only', 'numbers', [subjectOnly]],
      ['content and subject both', 'o', [percent, percentWord, upper, mixed, bySubject, subjectOnly]],
      ["'%' matches itself only", '%', [percent]],
      ["'100%' matches '100% done', not '100 percent done'", '100%', [percent]],
      ["'100%done' (no space) matches nothing", '100%done', []],
      ["'_' matches itself only", '_', [underscore]],
      ["'snake_case' does not match 'snakeXcase'", 'snake_case', [underscore]],
      ["'e_c' is not a wildcard", 'e_c', [underscore]],
      ["'\\' matches itself only", '\\', [backslash]],
      ["'C:\\temp' matches the backslash path only", 'C:\\temp', [backslash]],
      ["'\\t' is a backslash and a t, not an escape", '\\t', [backslash]],
      ["'%%' matches nothing", '%%', []],
      ['surrounding spaces are part of the term', ' done', [percent, percentWord]],
      ['no match: 200, empty data, total 0, totalPages 0', 'zzz-nothing', []],
      ['a LIKE-injection attempt is literal', "' or 1=1 --", []]
    ]
    for (const [name, q, expected] of cases) {
      t.same(await get(app, search(q)), { status: 200, body: pageBody(expected, 1, 25, expected.length) }, name)
    }
    t.same(await get(app, search('zzz-nothing')), { status: 200, body: pageBody([], 1, 25, 0) },
      'no match: totalPages is exactly 0')
    t.same(await get(app, search('t')), { status: 200, body: pageBody([percentWord, backslash, noBackslash, mixed, bySubject, subjectOnly, plain], 1, 25, 7) }, 'a one-letter term')
    t.same([notUnderscore.content, noBackslash.content], ['snakeXcase names', 'path C:tempdir'], 'sanity: the look-alikes exist')
    t.same(likePattern('a%b_c\\d'), '%a\\%b\\_c\\\\d%', 'likePattern escapes %, _ and \\')
  })

  t.test('q is required', async (t) => {
    const cases: Array<[string, string]> = [
      ['q missing', '/v2/messages/search'],
      ['q missing with other parameters', '/v2/messages/search?priority=high&limit=5'],
      ["q=''", '/v2/messages/search?q='],
      ["q='   '", '/v2/messages/search?q=%20%20%20'],
      ['q of tabs and newlines', '/v2/messages/search?q=%09%0A'],
      ['q only as a different case (Q=deploy)', '/v2/messages/search?Q=deploy'],
      ['the first of two q values is empty', '/v2/messages/search?q=&q=deploy']
    ]
    for (const [name, url] of cases) t.same(await get(app, url), MISSING_Q, `${name}: 400`)
  })

  t.test('filters and sorting combine with q', async (t) => {
    const cases: Array<[string, string, string, Message[]]> = [
      ['q + priority', 'deploy', 'priority=high', [upper, bySubject]],
      ['q + priority=low', 'deploy', 'priority=low', [mixed]],
      ['q + priority with no match', 'deploy', 'priority=urgent', []],
      ['q + authorId', 'deploy', `authorId=${bob.id}`, [bySubject]],
      ['q + authorId of the other author', 'deploy', `authorId=${alice.id}`, [upper, mixed]],
      ['q + subject (exact)', 'deploy', 'subject=Ops', [mixed]],
      ['q + priority + authorId', 'deploy', `priority=high&authorId=${alice.id}`, [upper]],
      ['q + order=desc', 'deploy', 'order=desc', [bySubject, mixed, upper]],
      ['q + sort=priority (urgency order), ties by id', 'deploy', 'sort=priority', [mixed, upper, bySubject]],
      ['q + sort=priority&order=desc, ties by id ascending', 'deploy', 'sort=priority&order=desc', [upper, bySubject, mixed]],
      ['q + a sort outside the allowlist: id', 'deploy', 'sort=content&order=desc', [bySubject, mixed, upper]]
    ]
    for (const [name, q, rest, expected] of cases) {
      t.same(await get(app, search(q, rest)), { status: 200, body: pageBody(expected, 1, 25, expected.length) }, name)
    }
    t.same(await get(app, search('deploy', 'priority=nope')), { status: 400, body: { error: 'Validation failed', details: ['priority must be one of low, normal, high, urgent'] } },
      'an unknown priority: 400 like the list')
    t.same(await get(app, search('deploy', 'authorId=abc')), { status: 400, body: { error: 'Validation failed', details: ['authorId must be a number'] } },
      'a non-numeric authorId: 400 like the list')
  })

  t.test('pagination, exactly like /v2/messages', async (t) => {
    const items = await createMessages(app, bob.id, 30, (i) => ({ content: `Paged item ${i}`, priority: i % 3 === 0 ? 'urgent' : 'normal' }))
    await createMessages(app, bob.id, 3, (i) => ({ content: `other ${i}` }))
    const urgent = items.filter((m) => m.priority === 'urgent')
    const cases: Array<[string, string, Reply]> = [
      ['defaults: page 1, limit 25', '', { status: 200, body: pageBody(items.slice(0, 25), 1, 25, 30) }],
      ['page 2 of 25: the remaining 5', 'page=2', { status: 200, body: pageBody(items.slice(25), 2, 25, 30) }],
      ['a page beyond the last: empty data, same total and totalPages', 'page=3', { status: 200, body: pageBody([], 3, 25, 30) }],
      ['limit=1000 is clamped to 100', 'limit=1000', { status: 200, body: pageBody(items, 1, 100, 30) }],
      ['limit=0 gives 1', 'limit=0', { status: 200, body: pageBody(items.slice(0, 1), 1, 1, 30) }],
      ['limit=-1 gives 1', 'limit=-1', { status: 200, body: pageBody(items.slice(0, 1), 1, 1, 30) }],
      ['limit=abc gives 25', 'limit=abc', { status: 200, body: pageBody(items.slice(0, 25), 1, 25, 30) }],
      ['limit=2.5 gives 2', 'limit=2.5', { status: 200, body: pageBody(items.slice(0, 2), 1, 2, 30) }],
      ['page=0 gives 1', 'page=0&limit=7', { status: 200, body: pageBody(items.slice(0, 7), 1, 7, 30) }],
      ['page=abc gives 1', 'page=abc&limit=7', { status: 200, body: pageBody(items.slice(0, 7), 1, 7, 30) }],
      ['page=2.5 gives 2', 'page=2.5&limit=7', { status: 200, body: pageBody(items.slice(7, 14), 2, 7, 30) }],
      ['page=3&limit=7: offset 14', 'page=3&limit=7', { status: 200, body: pageBody(items.slice(14, 21), 3, 7, 30) }],
      ['a huge page: empty, valid metadata', 'page=1e300', { status: 200, body: pageBody([], 1e300, 25, 30) }],
      ['q + priority with paging: total counts the filtered matches', 'priority=urgent&limit=4&page=2', { status: 200, body: pageBody(urgent.slice(4, 8), 2, 4, 10) }],
      ['q + priority, the last partial page', 'priority=urgent&limit=4&page=3', { status: 200, body: pageBody(urgent.slice(8), 3, 4, 10) }]
    ]
    for (const [name, rest, expected] of cases) t.same(await get(app, search('paged ITEM', rest)), expected, name)

    // Walking every page: total and totalPages never change, and the pages concatenate to every match once.
    const walked: Message[] = []
    for (let page = 1; page <= 5; page++) {
      const { status, body } = await get(app, search('paged item', `limit=7&page=${page}&order=desc`))
      t.same({ status, body }, { status: 200, body: pageBody(items.slice().reverse().slice((page - 1) * 7, page * 7), page, 7, 30) }, `walk page ${page}: total 30, totalPages 5`)
      walked.push(...body.data)
    }
    t.same(walked.map((m) => m.id), items.map((m) => m.id).reverse(), 'the pages concatenate to every match exactly once')

    const list = await get(app, `/v2/messages?authorId=${bob.id}&limit=7&page=2&priority=urgent`)
    const found = await get(app, search('paged item', `authorId=${bob.id}&limit=7&page=2&priority=urgent`))
    t.same(found, { status: 200, body: pageBody(urgent.slice(7), 2, 7, 10) }, 'search page 2 of the urgent matches')
    t.same(list.body.pagination, pagination(2, 7, 10, 3), 'the list with the same filters has the same pagination metadata')
    t.same(Object.keys(found.body).sort(), ['data', 'pagination'], 'only data and pagination at the top level')
  })

  t.test('the trigram indexes that serve the search exist', async (t) => {
    const rows = await queryRows<{ indexname: string, indexdef: string }>(app.db,
      sql`select indexname, indexdef from pg_indexes where tablename = 'messages' and indexname like '%trgm%' order by indexname`)
    t.same(rows, [
      { indexname: 'messages_content_words_trgm_idx', indexdef: "CREATE INDEX messages_content_words_trgm_idx ON public.messages USING gin (replace(lower(content), ' '::text, '0'::text) gin_trgm_ops)" + PENDING_LISTS },
      { indexname: 'messages_subject_trgm_idx', indexdef: 'CREATE INDEX messages_subject_trgm_idx ON public.messages USING gin (subject gin_trgm_ops)' + PENDING_LISTS }
    ], 'GIN gin_trgm_ops indexes on content (its words joined) and subject, with 32 MB pending lists (drizzle/0014)')

    // A transaction pins one connection (of the pool on PostgreSQL), so `set local` applies to the
    // EXPLAIN that follows; with sequential scans priced out, the planner shows whether the index can
    // serve the very condition the search runs.
    const plan = await app.db.transaction(async (tx) => {
      await tx.execute(sql`set local enable_seqscan = off`)
      const pattern = likePattern('deploy report')
      return await queryRows<{ 'QUERY PLAN': string }>(tx as unknown as App['db'],
        sql`explain select id from messages m where ${termMatches('m', sql`${pattern}::text`)}`)
    })
    const text = plan.map((row) => row['QUERY PLAN']).join('\n')
    t.match(text, /Bitmap Index Scan on messages_content_words_trgm_idx/, 'EXPLAIN: the search condition can use messages_content_words_trgm_idx')
    t.match(text, /Bitmap Index Scan on messages_subject_trgm_idx/, 'EXPLAIN: and messages_subject_trgm_idx')
  })

  t.test('the word joins index serves a phrase, and the index alone picks its candidates', async (t) => {
    const rows = await queryRows<{ indexdef: string }>(app.db,
      sql`select indexdef from pg_indexes where tablename = 'messages' and indexname = 'messages_content_joins_idx'`)
    t.same(rows, [{ indexdef: 'CREATE INDEX messages_content_joins_idx ON public.messages USING gin (message_word_joins(content))' + PENDING_LISTS }], 'a GIN index over the word joins of content')
    const plan = await app.db.transaction(async (tx) => {
      await tx.execute(sql`set local enable_seqscan = off`)
      const term = 'deploy report'
      const matching = matchingRowsSql('s', sql`s.id`, sql``, 'joins', { pattern: sql`${likePattern(term)}::text`, narrowed: sql`${narrowedPattern(term)}::text`, term: sql`${term}::text` })
      return await queryRows<{ 'QUERY PLAN': string }>(tx as unknown as App['db'], sql`explain ${matching}`)
    })
    const text = plan.map((row) => row['QUERY PLAN']).join('\n')
    t.match(text, /Bitmap Index Scan on messages_content_joins_idx/, 'EXPLAIN: the content half uses messages_content_joins_idx')
    // The joins of a candidate are never computed again: no condition outside an index scan names them.
    t.notMatch(text.split('\n').filter((line) => !/Index Cond|Recheck Cond/.test(line)).join('\n'), /message_word_joins/, 'EXPLAIN: no filter computes the joins of a row')
  })
})

// The content index joins words with '0' (drizzle/0011): a term's spaces must still match only spaces,
// its '0's only '0's, and case must still fold across the join, on every way a search page is read.
t.test('search terms with spaces', async (t) => {
  const app = await build(t, { testAuth: true })
  await createAuthor(app, 'alice', { name: 'Alice' })
  const create = async (content: string, subject?: string) => await createMessage(t, app, content, subject === undefined ? {} : { subject })
  const phrase = await create('Urgent Report due Friday')
  const zero = await create('urgent0report in the log')
  const twoSpaces = await create('urgent  report, spaced out')
  const joined = await create('urgentreport as one word')
  const apart = await create('a report that is urgent')
  const inSubject = await create('see the subject', 'URGENT REPORT')
  const accented = await create('ÉCOLE ÉTÉ 2026')
  const lineBreak = await create('urgent\nreport on two lines')
  const badge = await create('the badge for the kitchen')
  await create('badge fits the kitchen')
  const lookAlike = await create('(current report) filed')

  const cases: Array<[string, string, Message[]]> = [
    ['a phrase matches its words with one space between, in any case', 'urgent report', [phrase, inSubject]],
    ['a phrase cut mid-word at both ends', 'gent rep', [phrase, inSubject]],
    ["a '0' matches a '0', not a space", 'urgent0report', [zero]],
    ['two spaces match two spaces only', 'urgent  report', [twoSpaces]],
    ['the words without the space', 'urgentreport', [joined]],
    ['case folds on both sides of a space', 'école été', [accented]],
    ['a space does not match a line break', 't r', [phrase, inSubject, lookAlike]],
    ['a term ending in a space', 'urgent ', [phrase, twoSpaces, inSubject]],
    ['a term beginning with a space', ' report', [phrase, twoSpaces, apart, inSubject, lookAlike]],
    ['a line break matches a line break', 'urgent\nreport', [lineBreak]],
    // The index scans `%badge f%e kitchen%` for it (narrowedPattern), which the look-alike matches too.
    ['a phrase with short words inside', 'badge for the kitchen', [badge]],
    ['a phrase beginning with short words', 'for the kitchen', [badge]],
    // Word joins (drizzle/0012): 'ent rep' is a join of both, and the term's own ILIKE tells them apart.
    ['a phrase and a look-alike with its joins', 'current report', [lookAlike]],
    ['a phrase inside punctuation', '(current report)', [lookAlike]],
    ['a phrase of three-letter words only', 'for the', [badge]]
  ]
  for (const [name, q, expected] of cases) {
    t.same(await get(app, search(q)), { status: 200, body: pageBody(expected, 1, 25, expected.length) }, name)
    // Past page 1 by cursor, the term is a filter of the list's own statements: the same matches, one at a time.
    const walked: number[] = []
    let url: string | null = search(q, 'limit=1')
    for (let guard = 0; url !== null && guard < 20; guard++) {
      const res: LightMyRequestResponse = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 200, `${name}: a page by cursor`)
      const body: { data: Message[], pagination: { nextCursor: string | null } } = res.json<{ data: Message[], pagination: { nextCursor: string | null } }>()
      walked.push(...body.data.map((m) => m.id))
      url = body.pagination.nextCursor === null ? null : search(q, `limit=1&after=${encodeURIComponent(body.pagination.nextCursor)}`)
    }
    t.same(walked, expected.map((m) => m.id), `${name}: by cursor`)
  }
})

// narrowedPattern may drop parts of a term, never demand what the term lacks: every term must match
// its own narrowed pattern, as text and in the joined form the index holds, whatever its words,
// spaces and LIKE characters.
t.test('a narrowed pattern is matched by its own term', async (t) => {
  const app = await build(t)
  t.same(narrowedPattern('badge for the kitchen'), '%badge f%e kitchen%', 'a run of short words inside keeps its outer letters')
  t.same(narrowedPattern('for the kitchen'), '%e kitchen%', 'a leading run keeps its last letter')
  t.same(narrowedPattern('badge for the'), '%badge f%', 'a trailing run keeps its first letter')
  t.same(narrowedPattern('urgent report'), '%urgent report%', 'no short words: the whole term')
  t.same(narrowedPattern('for the'), '%for the%', 'only short words: the whole term')
  t.same(narrowedPattern('piece of cake'), '%piece of cake%', 'a run with no letter between its outer two stays')
  t.same(narrowedPattern('badge 50% off_the shelf'), '%badge 50\\% off\\_the shelf%', 'LIKE characters stay escaped')
  t.same(narrowedPattern('50% off_the shelf'), '%\\% off\\_the shelf%', 'a run cut down to a LIKE character keeps it escaped')

  const parts = ['a', 'of', 'the', 'for', 'badge', 'kitchen', '', '%', '_', '\\', 'x%y', '1_0', 'ÉTÉ', '0']
  let seed = 7
  const random = () => { seed = (seed * 16807) % 2147483647; return seed / 2147483647 }
  const terms: string[] = []
  for (let i = 0; i < 400; i++) {
    const words = Array.from({ length: 1 + Math.floor(random() * 6) }, () => parts[Math.floor(random() * parts.length)]!)
    terms.push(words.join(' '))
  }
  const rows = await queryRows<{ term: string, plain: boolean, joined: boolean }>(app.db, sql`
    select p.term, p.term like p.narrowed as plain,
      replace(lower(p.term), ' ', '0') like replace(lower(p.narrowed), ' ', '0') as joined
    from jsonb_to_recordset(${JSON.stringify(terms.map((term) => ({ term, narrowed: narrowedPattern(term) })))}::jsonb) as p(term text, narrowed text)`)
  t.equal(rows.length, terms.length, 'every term checked')
  t.same(rows.filter((row) => !row.plain || !row.joined), [], 'each term matches its narrowed pattern')
  t.ok(terms.some((term) => narrowedPattern(term) !== likePattern(term)), 'some terms were narrowed')
})

// The word joins a term asks for must be held by every content that holds the term, whatever surrounds
// it and however either is cased; and the code's guess that a term has joins must be the database's.
t.test('every content holding a term holds the word joins the term asks for', async (t) => {
  const app = await build(t)
  t.same(await queryRows<{ joins: string[] }>(app.db, sql`select search_term_joins('Badge for the KITCHEN') as joins`), [{ joins: ['dge for', 'the kit'] }],
    'joins between three-letter words are left out beside longer ones')
  t.same(await queryRows<{ joins: string[] }>(app.db, sql`select search_term_joins('for the') as joins`), [{ joins: ['for the'] }], 'and kept when there is nothing else')
  t.same(await queryRows<{ joins: string[] }>(app.db, sql`select message_word_joins('Hi  all, the urgent report.') as joins`), [{ joins: ['ll, the', 'the urg', 'ent rep'] }],
    'a content\'s joins: lower-cased, split at single spaces, between words of three characters or more')

  const parts = ['a', 'of', 'the', 'for', 'badge', 'kitchen', '', ' ', 'ÉTÉ', 'été', 'x%y', '50%_off', 'Ünïcödé', '(urgent', 'report)', 'ab\\c', '\n', 'naïve']
  let seed = 11
  const random = () => { seed = (seed * 16807) % 2147483647; return seed / 2147483647 }
  const pick = () => parts[Math.floor(random() * parts.length)]!
  const phrase = (most: number) => Array.from({ length: 1 + Math.floor(random() * most) }, pick).join(' ')
  const cased = (text: string) => random() < 0.3 ? text.toUpperCase() : text
  const cases = Array.from({ length: 400 }, () => {
    const term = phrase(5)
    // The term inside a content, cut mid-word or not on either side.
    const before = random() < 0.5 ? phrase(3) + (random() < 0.5 ? ' ' : '') : ''
    const after = random() < 0.5 ? (random() < 0.5 ? ' ' : '') + phrase(3) : ''
    return { term, pattern: likePattern(term), content: before + cased(term) + after }
  })
  const rows = await queryRows<{ term: string, held: boolean, has: boolean, ilike: boolean }>(app.db, sql`
    select p.term, message_word_joins(p.content) @> search_term_joins(p.term) as held,
      cardinality(search_term_joins(p.term)) > 0 as has, p.content ilike p.pattern as ilike
    from jsonb_to_recordset(${JSON.stringify(cases)}::jsonb) as p(term text, pattern text, content text)`)
  t.equal(rows.length, cases.length, 'every case checked')
  t.same(rows.filter((row) => !row.ilike), [], 'each content holds its term (the check checks something)')
  t.same(rows.filter((row) => !row.held), [], 'each content holds the joins of its term')
  t.same(rows.filter((row) => row.has !== hasWordJoins(row.term)).map((row) => row.term), [], 'hasWordJoins agrees with the database')
  t.ok(rows.filter((row) => row.has).length > 100, 'many terms have joins')
  t.ok(rows.filter((row) => !row.has).length > 20, 'and some have none')
})

// A term without a space or a '0' is matched by the trigram index's own expression alone (matchMode
// 'joined'): over the joined words, its pattern must match exactly the contents its ILIKE matches,
// whatever their spaces, '0's, case, accents and LIKE characters; and the search read must use the
// index and no ILIKE on content.
t.test('a term without a space or a 0 matches the joined words exactly as its ILIKE matches content', async (t) => {
  const app = await build(t)
  t.equal(matchMode('quokka'), 'joined')
  t.equal(matchMode('QUOKKA%_\\'), 'joined')
  t.equal(matchMode('a0b'), 'trigrams', "a '0' could stand for a joined space")
  t.equal(matchMode('of the'), 'trigrams', 'a space, and no word joins')
  t.equal(matchMode('urgent report'), 'joins')

  const parts = ['a', 'b', 'ab', 'A', 'B', '0', ' ', '  ', 'É', 'é', 'ß', 'SS', 'İ', 'i', '%', '_', '\\', 'kka', 'quo', 'QUOKKA', '\n']
  let seed = 13
  const random = () => { seed = (seed * 16807) % 2147483647; return seed / 2147483647 }
  const pick = () => parts[Math.floor(random() * parts.length)]!
  const text = (most: number) => Array.from({ length: 1 + Math.floor(random() * most) }, pick).join('')
  const cases: Array<{ term: string, pattern: string, content: string }> = []
  while (cases.length < 2_000) {
    const term = text(3)
    if (matchMode(term) !== 'joined') continue
    // Half hold the term (in another case, perhaps), half are whatever the parts make.
    const content = random() < 0.5 ? text(4) + (random() < 0.5 ? term.toUpperCase() : term) + text(4) : text(8)
    cases.push({ term, pattern: likePattern(term), content })
  }
  const rows = await queryRows<{ term: string, content: string, joined: boolean, ilike: boolean }>(app.db, sql`
    select p.term, p.content, replace(lower(p.content), ' ', '0') like replace(lower(p.pattern), ' ', '0') as joined, p.content ilike p.pattern as ilike
    from jsonb_to_recordset(${JSON.stringify(cases)}::jsonb) as p(term text, pattern text, content text)`)
  t.equal(rows.length, cases.length, 'every case checked')
  t.same(rows.filter((row) => row.joined !== row.ilike), [], 'the joined pattern decides as the ILIKE does')
  t.ok(rows.filter((row) => row.ilike).length > 500 && rows.filter((row) => !row.ilike).length > 500, 'both answers are common')

  const plan = await app.db.transaction(async (tx) => {
    await tx.execute(sql`set local enable_seqscan = off`)
    const term = 'quokka'
    const matching = matchingRowsSql('s', sql`s.id`, sql``, matchMode(term), { pattern: sql`${likePattern(term)}::text`, narrowed: sql`${narrowedPattern(term)}::text`, term: sql`${term}::text` })
    return await queryRows<{ 'QUERY PLAN': string }>(tx as unknown as App['db'], sql`explain ${matching}`)
  })
  const planText = plan.map((row) => row['QUERY PLAN']).join('\n')
  t.match(planText, /Bitmap Index Scan on messages_content_words_trgm_idx/, 'EXPLAIN: the content index')
  t.match(planText, /Bitmap Index Scan on messages_subject_trgm_idx/, 'EXPLAIN: and the subject index, in one scan of the table')
  t.notMatch(planText, /content ~~\*/, 'EXPLAIN: no ILIKE on content')
})
