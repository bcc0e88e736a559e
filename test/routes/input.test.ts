import t from 'tap'
import { build } from '../helpers/build.js'

const NAME = 'name is required and must be a string'
const EMAIL = 'email is required and must be a string'
const BAD_ID = { error: 'Parameter "id" must be a positive integer' }

t.test('SPEC 4.7: the input-validation routes', async (t) => {
  const app = await build(t)

  const post = async (payload: unknown) => {
    const res = await app.inject({ method: 'POST', url: '/v2/input/users', payload: payload as Record<string, unknown> })
    return { status: res.statusCode, body: res.json() }
  }
  const get = async (id: string) => {
    const res = await app.inject({ method: 'GET', url: `/v2/input/users/${id}` })
    return { status: res.statusCode, body: res.json() }
  }

  t.test('POST /v2/input/users', async (t) => {
    t.same(await post({}), { status: 400, body: { error: 'Validation failed', details: [NAME, EMAIL] } },
      'rule 1: an empty object lists both a name and an email problem')
    t.same(await post({ name: 'Alice' }), { status: 400, body: { error: 'Validation failed', details: [EMAIL] } },
      'rule 2: only name lists only the email problem')
    t.same(await post({ email: 'alice@example.com' }), { status: 400, body: { error: 'Validation failed', details: [NAME] } },
      'only email lists only the name problem')
    t.same(await post({ name: '', email: '' }), { status: 400, body: { error: 'Validation failed', details: [NAME, EMAIL] } },
      'rule 3 / 7.3: empty strings are both reported, together')
    t.same(await post({ name: 123, email: 456 }), { status: 400, body: { error: 'Validation failed', details: [NAME, EMAIL] } },
      'non-strings (numbers) are both reported; a body is never coerced')
    t.same(await post({ name: true, email: ['a@b.c'] }), { status: 400, body: { error: 'Validation failed', details: [NAME, EMAIL] } },
      'non-strings (boolean, array) are both reported')
    t.same(await post({ name: null, email: { address: 'a@b.c' } }), { status: 400, body: { error: 'Validation failed', details: [NAME, EMAIL] } },
      'null and an object are both reported')
    t.same(await post({ name: '   ', email: '\t\n' }), { status: 400, body: { error: 'Validation failed', details: [NAME, EMAIL] } },
      'whitespace-only strings count as empty')
    t.same(await post({ name: 'Alice', email: 42 }), { status: 400, body: { error: 'Validation failed', details: [EMAIL] } },
      'one valid and one invalid field: only the invalid one')
    t.same(await post({ name: '', email: 'alice@example.com' }), { status: 400, body: { error: 'Validation failed', details: [NAME] } },
      'an empty name with a valid email: only the name')

    t.same(await post({ name: 'Alice', email: 'alice@example.com' }), { status: 201, body: { name: 'Alice', email: 'alice@example.com' } },
      'valid: 201 echoing { name, email }')
    t.same(await post({ name: ' Alice ', email: 'alice@example.com', role: 'Owner', id: 7 }),
      { status: 201, body: { name: ' Alice ', email: 'alice@example.com' } },
      'valid with extra members: 201 echoing only { name, email }, the strings untouched')
  })

  t.test('GET /v2/input/users/:id', async (t) => {
    t.same(await get('1'), { status: 200, body: { id: 1 } }, 'id 1: 200 { id: 1 }')
    t.same(await get('42'), { status: 200, body: { id: 42 } }, 'id 42: 200 { id: 42 }, a number')
    t.same(await get('9007199254740991'), { status: 200, body: { id: 9007199254740991 } }, 'the largest safe integer: 200')
    for (const id of ['0', '-1', 'abc', '3.14', '9007199254740992', '1e400', '%20']) {
      t.same(await get(id), { status: 400, body: BAD_ID }, `id ${id}: 400 Parameter "id" must be a positive integer`)
    }
    // CONTRACT 16: percent-encoding that is not UTF-8, or a stray %, is the route's own 400 too.
    for (const id of ['%ED%A0%80', '%zz', '%', '1%', '%FF', '%C0%AF', '1%E2%82']) {
      t.same(await get(id), { status: 400, body: BAD_ID }, `id ${id}: 400 Parameter "id" must be a positive integer`)
    }
    t.same(await get('%31%32'), { status: 200, body: { id: 12 } }, 'well-formed escapes still decode: %31%32 is 12')
  })
})
