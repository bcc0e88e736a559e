import createClient from 'openapi-fetch'
import type { paths } from './api.js'

// The README walk-through, written as a user of a client generated from /api-docs/json would write it:
// every path, parameter and body is typed by the document, so a document change that breaks this
// code fails `tsc` (test/openapi/openapi-client.test.ts compiles it strictly before running it).

export interface Tokens {
  /** A caller with the User role. */
  user: string
  /** A caller with the Admin role. */
  admin: string
}

/** One step: what was called, the status it answered, and the error text when it failed. */
export interface Step { step: string, status: number, error?: string }

export async function walk (baseUrl: string, tokens: Tokens): Promise<Step[]> {
  const api = createClient<paths>({ baseUrl })
  const as = (token: string) => ({ Authorization: `Bearer ${token}` })
  const steps: Step[] = []
  const record = (step: string, response: Response, error?: { error: string }): void => {
    steps.push(error === undefined ? { step, status: response.status } : { step, status: response.status, error: error.error })
  }

  const created = await api.POST('/v2/messages', {
    params: { header: { 'Idempotency-Key': `walk-${Date.now()}` } },
    headers: as(tokens.user),
    body: { content: 'The deploy is done.', subject: 'Release 2.4', priority: 'high' }
  })
  record('create', created.response, created.error)
  const id = created.data?.id ?? 0

  const list = await api.GET('/v2/messages', { params: { query: { page: 1, limit: 10, sort: 'createdAt', order: 'desc' } } })
  record(`list: ${list.data?.pagination.total ?? -1} in all, first ${list.data?.data[0]?.id ?? -1}`, list.response, list.error)

  const filtered = await api.GET('/v2/messages', { params: { query: { priority: 'high', limit: 5 } } })
  record(`filter: ${filtered.data?.data.every((message) => message.priority === 'high') ?? false}`, filtered.response, filtered.error)

  const found = await api.GET('/v2/messages/search', { params: { query: { q: 'deploy' } } })
  record(`search: ${found.data?.data.length ?? -1}`, found.response, found.error)

  const one = await api.GET('/v2/messages/{id}', { params: { path: { id } } })
  record(`get: ${one.data?.author.name ?? 'no author'}`, one.response, one.error)

  const me = await api.GET('/v2/users/me', { headers: as(tokens.user) })
  record(`me: ${me.data?.role ?? 'none'}`, me.response, me.error)

  const hello = await api.GET('/v2/hello', { headers: as(tokens.admin) })
  record(`hello: ${hello.data?.message ?? ''}`, hello.response, hello.error)

  const invalid = await api.POST('/v2/input/users', { body: { name: 'Alice', email: '' } })
  record('invalid body', invalid.response, invalid.error)

  const anonymous = await api.POST('/v2/messages', { body: { content: 'no token' } })
  record('no token', anonymous.response, anonymous.error)

  const refused = await api.GET('/v2/hello', { headers: as(tokens.user) })
  record('below Admin', refused.response, refused.error)

  const deleted = await api.DELETE('/v2/messages/{id}', { params: { path: { id } }, headers: as(tokens.user) })
  record('delete', deleted.response, deleted.error)

  const gone = await api.GET('/v2/messages/{id}', { params: { path: { id } } })
  record('get deleted', gone.response, gone.error)
  return steps
}
