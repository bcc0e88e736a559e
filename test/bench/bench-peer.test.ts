import t from 'tap'
import { platformaticMessageProblem, platformaticPageProblem, platformaticPath, platformaticPostBody } from '../../bench/servers/platformatic-peer.js'

t.test('a list or search path as the same request to Platformatic DB', async (t) => {
  t.equal(platformaticPath('/v2/messages?page=1&limit=25'), '/messages?limit=25&offset=0&totalCount=true&orderby.id=asc')
  t.equal(platformaticPath('/v2/messages?page=2000&limit=25'), '/messages?limit=25&offset=49975&totalCount=true&orderby.id=asc', 'page n starts at (n - 1) × limit')
  t.equal(platformaticPath('/v2/messages'), '/messages?limit=25&offset=0&totalCount=true&orderby.id=asc', 'defaults: page 1, limit 25')
  t.equal(platformaticPath('/v2/messages?page=0&limit=1000'), '/messages?limit=100&offset=0&totalCount=true&orderby.id=asc', 'page and limit fall back and are clamped as the service does them')
  t.equal(platformaticPath('/v2/messages?priority=high&page=1&limit=25'),
    '/messages?limit=25&offset=0&totalCount=true&where.priority.eq=high&orderby.id=asc')
  t.equal(platformaticPath('/v2/messages?authorId=12&subject=Weekly%20sync&sort=createdAt&order=desc&page=3&limit=10'),
    '/messages?limit=10&offset=20&totalCount=true&where.authorId.eq=12&where.subject.eq=Weekly+sync&orderby.createdAt=desc&orderby.id=asc',
    'ties in the sort key go by id ascending (CONTRACT 7)')

  const search = new URL(platformaticPath('/v2/messages/search?q=quokka&page=1&limit=25'), 'http://peer')
  t.equal(search.pathname, '/messages')
  t.equal(search.searchParams.get('where.or'), '(content.ilike=%quokka%|subject.ilike=%quokka%)', 'content or subject, case-insensitive')
  t.equal(search.searchParams.get('orderby.id'), 'asc')
  const escaped = new URL(platformaticPath('/v2/messages/search?q=50%25_off%5C'), 'http://peer')
  t.equal(escaped.searchParams.get('where.or'), '(content.ilike=%50\\%\\_off\\\\%|subject.ilike=%50\\%\\_off\\\\%)', '%, _ and \\ match themselves (CONTRACT 10)')

  t.throws(() => platformaticPath('/v2/messages/search?q=a%7Cb'), /cannot carry/, 'where.or has no escape for |')
  t.throws(() => platformaticPath('/v2/messages/search?q=a%3Db'), /cannot carry/, 'nor for =')
  t.throws(() => platformaticPath('/v2/messages/search?q=%20'), /needs a term/)
  t.throws(() => platformaticPath('/v2/users?page=1'), /no Platformatic equivalent/)
  t.throws(() => platformaticPath('/v2/messages?sort=author'), /no sort author/)
})

t.test('a Platformatic page is checked against the exact ids and the total in X-Total-Count', async (t) => {
  const expect = { total: 40, ids: [3, 4] }
  const body = JSON.stringify([{ id: '3', priority: 'high' }, { id: '4', priority: 'high' }])
  t.equal(platformaticPageProblem(body, { 'x-total-count': '40' }, expect), undefined)
  t.equal(platformaticPageProblem(body, { 'x-total-count': '41' }, expect), 'X-Total-Count is 41, expected 40')
  t.equal(platformaticPageProblem(body, {}, expect), 'no X-Total-Count header')
  t.equal(platformaticPageProblem(JSON.stringify([{ id: '4' }, { id: '3' }]), { 'x-total-count': '40' }, expect), 'ids 4,3… are not the expected 3,4… (2 of 2)', 'in order')
  t.equal(platformaticPageProblem('[]', { 'x-total-count': '40' }, expect), 'ids … are not the expected 3,4… (0 of 2)')
  t.equal(platformaticPageProblem('{"data":[]}', { 'x-total-count': '40' }, expect), 'not an array of rows: {"data":[]}')
  t.equal(platformaticPageProblem('<html>', { 'x-total-count': '40' }, expect), 'body is not JSON: <html>')
  const items = (data: Array<Record<string, unknown>>): string | undefined => data.every((m) => m.priority === 'high') ? undefined : 'an item that is not high priority'
  t.equal(platformaticPageProblem(body, { 'x-total-count': '40' }, { ...expect, items }), undefined)
  t.equal(platformaticPageProblem(JSON.stringify([{ id: '3', priority: 'high' }, { id: '4', priority: 'low' }]), { 'x-total-count': '40' }, { ...expect, items }),
    'an item that is not high priority', 'the items are checked too')
})

t.test('a service POST body for Platformatic names its author, and the answer is the created row', async (t) => {
  t.same(JSON.parse(platformaticPostBody('{"content":"Hello","subject":"Hi","priority":"low"}', 17)),
    { content: 'Hello', subject: 'Hi', priority: 'low', authorId: '17' }, 'authorId is a bigint column, so a string')
  t.same(JSON.parse(platformaticPostBody('{"content":"Hello"}', 2)), { content: 'Hello', priority: 'normal', authorId: '2' },
    'priority is required by its input schema; the service defaults it to normal')
  t.equal(platformaticMessageProblem('{"id":"100001","content":"Hello","authorId":"17"}'), undefined)
  t.equal(platformaticMessageProblem('{"id":100001,"content":"Hello"}'), 'not a message: {"id":100001,"content":"Hello"}')
  t.equal(platformaticMessageProblem('{"statusCode":401}'), 'not a message: {"statusCode":401}')
  t.equal(platformaticMessageProblem('not json'), 'not a message: not json')
})
