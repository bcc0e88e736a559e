import type { SQL } from 'drizzle-orm'
import type { App } from '../../src/app.js'
import type { Message, NewMessage } from '../../src/schemas/messages.js'
import type { LocalUser } from '../../src/schemas/users.js'

/** A local user for `sub`, created (or refreshed) through the users repository. */
export async function createAuthor (app: App, sub: string, over: { name?: string | null, email?: string | null, role?: string } = {}): Promise<LocalUser> {
  return app.usersRepository.upsert({
    subjectId: sub,
    name: over.name === undefined ? `Name of ${sub}` : over.name,
    email: over.email === undefined ? `${sub}@example.com` : over.email,
    role: over.role ?? 'User'
  })
}

export type MessageOverrides = Partial<Omit<NewMessage, 'author'>>

/**
 * `n` messages by `authorId`, created one after the other through the repository so their ids
 * ascend in creation order. `overrides` is either fixed values or a function of the index (0-based).
 */
export async function createMessages (
  app: App,
  authorId: number,
  n: number,
  overrides: MessageOverrides | ((index: number) => MessageOverrides) = {}
): Promise<Message[]> {
  const author = await app.usersRepository.findById(authorId)
  if (author === null) throw new Error(`no user ${authorId}`)
  // The author exists: nothing is provisioned.
  const caller = { sub: author.subjectId, role: author.role }
  const created: Message[] = []
  for (let i = 0; i < n; i++) {
    const over = typeof overrides === 'function' ? overrides(i) : overrides
    const { body } = await app.messagesRepository.create(caller, { content: `message ${i + 1}`, ...over })
    if (typeof body === 'string') throw new Error('a create without a key answers its message')
    created.push(body)
  }
  return created
}

/**
 * Runs raw SQL on the app's database and returns the rows, whichever driver is behind it
 * (postgres.js answers an array, PGlite an object with `rows`).
 */
export async function queryRows<T extends Record<string, unknown>> (db: App['db'], query: SQL): Promise<T[]> {
  const result: unknown = await db.execute(query)
  return (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as T[]
}
