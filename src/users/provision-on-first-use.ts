/**
 * What an attempt answers when it could not act as the caller because the caller's subject has no
 * local user yet: the repositories' writes find the author by subject inside their one statement, and
 * say so with null rather than paying a lookup first.
 */
export type UnknownCaller = null

/**
 * SPEC 5.5 for a statement that acts as the caller: the common case is the statement alone. A subject
 * seen for the first time is provisioned (`provision`: userinfo, then the upsert; 502 when userinfo
 * fails), and the statement runs once more.
 */
export async function provisionOnFirstUse<T> (attempt: () => Promise<T | UnknownCaller>, provision: () => Promise<unknown>): Promise<T> {
  const first = await attempt()
  if (first !== null) return first
  await provision()
  const again = await attempt()
  if (again === null) throw new Error('local user vanished right after it was provisioned')
  return again
}
