import t from 'tap'
import type { App } from '../../src/app.js'
import { build } from '../helpers/build.js'
import { createAuthor } from '../helpers/fixtures.js'
import { cursorKinds, pageBody } from '../helpers/pagination.js'

const UNAUTHORIZED = { error: 'Invalid or missing token' }
const FORBIDDEN = { error: 'Insufficient permissions' }
const USER_NOT_FOUND = { error: 'User not found' }
const BAD_ID = { error: 'Parameter "id" must be a positive integer' }

interface Reply { status: number, body: any }

async function get (app: App, url: string, caller?: Record<string, unknown>): Promise<Reply> {
  const res = await app.inject({ method: 'GET', url, headers: caller === undefined ? {} : { 'x-test-user': JSON.stringify(caller) } })
  return { status: res.statusCode, body: cursorKinds(res.json()) }
}

t.test('/v2/users', async (t) => {
  const app = await build(t, { testAuth: true })
  const admin = { sub: 'the-admin', role: 'Admin', email: 'admin@example.com' }

  t.test('GET /v2/users (Admin or higher): the collection', async (t) => {
    const u1 = await createAuthor(app, 'u1', { name: 'Carol', email: 'b@example.com', role: 'User' })
    const u2 = await createAuthor(app, 'u2', { name: 'Alice', email: 'd@example.com', role: 'Admin' })
    const u3 = await createAuthor(app, 'u3', { name: 'Erin', email: 'a@example.com', role: 'User' })
    const u4 = await createAuthor(app, 'u4', { name: 'Bob', email: 'e@example.com', role: 'Moderator' })
    const u5 = await createAuthor(app, 'u5', { name: 'Dave', email: 'c@example.com', role: 'Owner' })
    const u6 = await createAuthor(app, 'u6', { name: 'Frank', email: 'f@example.com', role: 'User' })
    const all = [u1, u2, u3, u4, u5, u6]

    const cases: Array<[string, string, Reply]> = [
      ['no parameters: every user by id, page 1, limit 25', '', { status: 200, body: pageBody(all, 1, 25, 6) }],
      ['only data and pagination at the top level', 'limit=1', { status: 200, body: pageBody([u1], 1, 1, 6) }],
      ['limit=2&page=2', 'limit=2&page=2', { status: 200, body: pageBody([u3, u4], 2, 2, 6) }],
      ['limit=4&page=2: the last, partial page', 'limit=4&page=2', { status: 200, body: pageBody([u5, u6], 2, 4, 6) }],
      ['a page beyond the last: empty data, same metadata', 'limit=2&page=4', { status: 200, body: pageBody([], 4, 2, 6) }],
      ['limit=1000 is clamped to 100', 'limit=1000', { status: 200, body: pageBody(all, 1, 100, 6) }],
      ['limit=0 gives 1', 'limit=0', { status: 200, body: pageBody([u1], 1, 1, 6) }],
      ['limit=abc gives 25', 'limit=abc', { status: 200, body: pageBody(all, 1, 25, 6) }],
      ['page=0 gives 1', 'page=0&limit=2', { status: 200, body: pageBody([u1, u2], 1, 2, 6) }],
      ['sort=name', 'sort=name', { status: 200, body: pageBody([u2, u4, u1, u5, u3, u6], 1, 25, 6) }],
      ['sort=name&order=desc', 'sort=name&order=desc', { status: 200, body: pageBody([u6, u3, u5, u1, u4, u2], 1, 25, 6) }],
      ['sort=email', 'sort=email', { status: 200, body: pageBody([u3, u1, u5, u2, u4, u6], 1, 25, 6) }],
      ['sort=role: ties broken by id ascending', 'sort=role', { status: 200, body: pageBody([u2, u4, u5, u1, u3, u6], 1, 25, 6) }],
      ['sort=role&order=desc: ties still by id ascending', 'sort=role&order=desc', { status: 200, body: pageBody([u1, u3, u6, u5, u4, u2], 1, 25, 6) }],
      ['sort=createdAt', 'sort=createdAt', { status: 200, body: pageBody(all, 1, 25, 6) }],
      ['sort=createdAt&order=desc', 'sort=createdAt&order=desc', { status: 200, body: pageBody(all.slice().reverse(), 1, 25, 6) }],
      ['sort=id&order=desc', 'sort=id&order=desc', { status: 200, body: pageBody(all.slice().reverse(), 1, 25, 6) }],
      ['a field outside the allowlist falls back to id', 'sort=subjectId&order=desc', { status: 200, body: pageBody(all.slice().reverse(), 1, 25, 6) }],
      ['sort=updatedAt is not in the allowlist either', 'sort=updatedAt', { status: 200, body: pageBody(all, 1, 25, 6) }],
      ['order=DESC is asc', 'sort=name&order=DESC', { status: 200, body: pageBody([u2, u4, u1, u5, u3, u6], 1, 25, 6) }],
      ['filter role=User', 'role=User', { status: 200, body: pageBody([u1, u3, u6], 1, 25, 3) }],
      ['role=User with paging: total counts the filtered users', 'role=User&limit=2&page=2', { status: 200, body: pageBody([u6], 2, 2, 3) }],
      ['role=User with sort', 'role=User&sort=email&order=desc', { status: 200, body: pageBody([u6, u1, u3], 1, 25, 3) }],
      ['role=Owner', 'role=Owner', { status: 200, body: pageBody([u5], 1, 25, 1) }],
      ['a role nobody has: 200, empty, total 0, totalPages 0', 'role=SuperAdmin', { status: 200, body: pageBody([], 1, 25, 0) }],
      ['an unknown role: 400', 'role=Nope', { status: 400, body: { error: 'Validation failed', details: ['role must be one of User, Moderator, Admin, SuperAdmin, Owner'] } }],
      ['role is case-sensitive: 400', 'role=user', { status: 400, body: { error: 'Validation failed', details: ['role must be one of User, Moderator, Admin, SuperAdmin, Owner'] } }]
    ]
    for (const [name, query, expected] of cases) {
      t.same(await get(app, query === '' ? '/v2/users' : `/v2/users?${query}`, admin), expected, name)
    }
    t.same(await get(app, '/v2/users?role=User', { sub: 'so', role: 'SuperAdmin' }), { status: 200, body: pageBody([u1, u3, u6], 1, 25, 3) }, 'SuperAdmin: 200')
    t.same(await get(app, '/v2/users?role=User', { sub: 'ow', role: 'Owner' }), { status: 200, body: pageBody([u1, u3, u6], 1, 25, 3) }, 'Owner: 200')
    t.same(await get(app, '/v2/users', { sub: 'mo', role: 'Moderator' }), { status: 403, body: FORBIDDEN }, 'Moderator: 403')
    t.same(await get(app, '/v2/users', { sub: 'us', role: 'User' }), { status: 403, body: FORBIDDEN }, 'User: 403')
    t.same(await get(app, '/v2/users?role=Nope', { sub: 'us', role: 'User' }), { status: 403, body: FORBIDDEN }, 'User with an invalid filter: 403 before validation')
    t.same(await get(app, '/v2/users'), { status: 401, body: UNAUTHORIZED }, 'no caller: 401')
    t.same(await get(app, '/v2/users', admin), { status: 200, body: pageBody(all, 1, 25, 6) }, 'listing provisions nobody: still six users')
  })

  t.test('GET /v2/users/me creates the local user on first call', async (t) => {
    const carol = { sub: 'carol', role: 'Moderator', email: 'carol@example.com', name: 'Carol' }
    t.equal(await app.usersRepository.findBySubject('carol'), null, 'no local user before the first call')
    const first = await get(app, '/v2/users/me', carol)
    t.match(first, {
      status: 200,
      body: { id: Number, subjectId: 'carol', email: 'carol@example.com', name: 'Carol', role: 'Moderator', createdAt: String, updatedAt: String }
    }, 'first call: 200, the new record with the role from the stub claims')
    t.same(Object.keys(first.body).sort(), ['createdAt', 'email', 'id', 'name', 'role', 'subjectId', 'updatedAt'], 'exactly the user item')
    t.same(await app.usersRepository.findBySubject('carol'), first.body, 'the row is stored')
    t.same(await get(app, '/v2/users/me', carol), { status: 200, body: first.body }, 'second call: the same record, nothing re-created')

    const unknown = await get(app, '/v2/users/me', { sub: 'rooty', role: 'Root' })
    t.match(unknown, {
      status: 200,
      body: { id: Number, subjectId: 'rooty', email: null, name: null, role: 'User', createdAt: String, updatedAt: String }
    }, 'an unknown role is stored as User; absent email and name are null')
    const noRole = await get(app, '/v2/users/me', { sub: 'norole', email: 'n@example.com' })
    t.match(noRole, {
      status: 200,
      body: { id: Number, subjectId: 'norole', email: 'n@example.com', name: null, role: 'User', createdAt: String, updatedAt: String }
    }, 'no role claim: stored as User')

    t.same(await get(app, '/v2/users/me'), { status: 401, body: UNAUTHORIZED }, 'no caller: 401')
  })

  t.test('GET /v2/users/:id', async (t) => {
    const bob = await createAuthor(app, 'bob', { name: 'Bob', role: 'User' })
    const other = await createAuthor(app, 'other', { name: 'Other', role: 'User' })
    const missing = other.id + 1000
    const asBob = { sub: 'bob', role: 'User', email: 'bob@example.com' }
    const asMod = { sub: 'bob-mod', role: 'Moderator' }

    t.same(await get(app, `/v2/users/${bob.id}`, asBob), { status: 200, body: bob }, 'own id as User: 200')
    t.same(await get(app, `/v2/users/${other.id}`, asBob), { status: 403, body: FORBIDDEN }, "another user's existing id as User: 403")
    t.same(await get(app, `/v2/users/${missing}`, asBob), { status: 403, body: FORBIDDEN }, 'a non-existing id as User: 403 too (CONTRACT 10)')
    t.same(await get(app, `/v2/users/${other.id}`, asMod), { status: 403, body: FORBIDDEN }, 'another id as Moderator: 403')
    t.same(await get(app, `/v2/users/${missing}`, asMod), { status: 403, body: FORBIDDEN }, 'a non-existing id as Moderator: 403')
    t.same(await get(app, `/v2/users/${other.id}`, { sub: 'bob-root', role: 'Root' }), { status: 403, body: FORBIDDEN }, 'another id as an unknown role: 403')
    t.same(await get(app, `/v2/users/${other.id}`, admin), { status: 200, body: other }, 'another existing id as Admin: 200')
    t.same(await get(app, `/v2/users/${bob.id}`, { sub: 'owner', role: 'Owner' }), { status: 200, body: bob }, 'another existing id as Owner: 200')
    t.same(await get(app, `/v2/users/${missing}`, admin), { status: 404, body: USER_NOT_FOUND }, 'a missing id as Admin: 404')
    t.same(await get(app, `/v2/users/${Number.MAX_SAFE_INTEGER}`, admin), { status: 404, body: USER_NOT_FOUND }, 'the largest safe id as Admin: 404')
    for (const bad of ['abc', '0', '-1', '3.14', '1e400', String(Number.MAX_SAFE_INTEGER + 2), '%20']) {
      t.same(await get(app, `/v2/users/${bad}`, admin), { status: 400, body: BAD_ID }, `id ${JSON.stringify(bad)}: 400`)
    }
    t.same(await get(app, '/v2/users/abc', asBob), { status: 400, body: BAD_ID }, 'an invalid id as User: 400 as well')
    t.same(await get(app, `/v2/users/${bob.id}`), { status: 401, body: UNAUTHORIZED }, 'no caller: 401')
    t.same(await get(app, '/v2/users/abc'), { status: 401, body: UNAUTHORIZED }, 'no caller and an invalid id: 401 first')
  })
})
