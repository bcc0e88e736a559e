import t from 'tap'
import { VerifiedTokens } from '../../src/auth/verified-tokens.js'

const entry = (until: number) => ({ user: { sub: 'alice' }, header: { alg: 'RS256', kid: 'k1' }, pem: 'PEM', until })

t.test('an entry is served strictly before its until, then dropped', async (t) => {
  const tokens = new VerifiedTokens<{ sub: string }>(10)
  tokens.set('a.b.c', entry(1000))
  t.same(tokens.get('a.b.c', 999)?.user, { sub: 'alice' })
  t.equal(tokens.get('a.b.c', 1000), undefined, 'not at until')
  t.equal(tokens.get('a.b.c', 0), undefined, 'gone once it expired')
})

t.test('the whole token is the key: a token differing in one character is a miss', async (t) => {
  const tokens = new VerifiedTokens<{ sub: string }>(10)
  tokens.set('a.b.c', entry(1000))
  t.equal(tokens.get('a.b.d', 0), undefined)
  tokens.delete('a.b.c')
  t.equal(tokens.get('a.b.c', 0), undefined, 'deleted')
})

t.test('bounded: past the limit the oldest entry goes first', async (t) => {
  const tokens = new VerifiedTokens<{ sub: string }>(2)
  tokens.set('one', entry(1000))
  tokens.set('two', entry(1000))
  tokens.set('one', entry(1000))
  tokens.set('three', entry(1000))
  t.same(['one', 'two', 'three'].map((token) => tokens.get(token, 0) !== undefined), [true, false, true],
    'setting again makes an entry young; the oldest is evicted')
})
