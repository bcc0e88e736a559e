import t from 'tap'
import { SizedLru } from '../../src/memory/sized-lru.js'

t.test('held within the bound, least recently used out first', async (t) => {
  const lru = new SizedLru<string>(10)
  lru.set('a', 'A', 4)
  lru.set('b', 'B', 4)
  t.equal(lru.get('a'), 'A', 'a is used, so b is now the oldest')
  lru.set('c', 'C', 4)
  t.equal(lru.peek('b'), undefined, 'b went to make room')
  t.same([lru.peek('a'), lru.peek('c')], ['A', 'C'])
  t.equal(lru.held, 8)
  t.equal(lru.count, 2)
})

t.test('peek does not count as a use', async (t) => {
  const lru = new SizedLru<number>(2)
  lru.set('a', 1, 1)
  lru.set('b', 2, 1)
  lru.peek('a')
  lru.set('c', 3, 1)
  t.equal(lru.peek('a'), undefined, 'a was still the oldest')
  t.equal(lru.peek('b'), 2)
})

t.test('replacing a key counts its new size only; deleting frees it', async (t) => {
  const lru = new SizedLru<string>(100)
  lru.set('a', 'small', 5)
  lru.set('a', 'large', 50)
  t.equal(lru.held, 50)
  lru.delete('a')
  lru.delete('a')
  t.equal(lru.held, 0, 'deleting twice frees once')
  t.equal(lru.count, 0)
})

t.test('a value larger than `largest` is not kept, and does not evict', async (t) => {
  const lru = new SizedLru<string>(100, 12)
  lru.set('a', 'A', 10)
  lru.set('big', 'B', 13)
  t.equal(lru.peek('big'), undefined)
  t.equal(lru.peek('a'), 'A')
  lru.set('a', 'too big now', 20)
  t.equal(lru.peek('a'), undefined, 'a replacement too large removes the old value too')
  t.equal(lru.held, 0)
})
