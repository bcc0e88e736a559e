import { sql } from 'drizzle-orm'
import { hasRoleAtLeast } from '../auth/roles.js'
import type { Database } from '../db/client.js'
import { statement } from '../db/statement.js'
import { ForbiddenError, NotFoundError } from '../errors.js'
import { placeholder } from '../pages/spec.js'

// CONTRACT 11: a delete's own check is part of the write, so it runs on the primary, and in the
// same statement as the delete: no replica lag and no concurrent delete between looking and deleting.
// FOR UPDATE makes a delete that lost a race to another see the row gone (404), not refused (403).
const deleteAsStatement = statement<{ found: boolean, deleted: boolean, known: boolean }>('messages_delete_as', sql`
  WITH me AS (SELECT id FROM users WHERE subject_id = ${placeholder('subjectId')}::text),
  target AS (SELECT id, author_id FROM messages WHERE id = ${placeholder('id')}::bigint FOR UPDATE),
  deleted AS (
    DELETE FROM messages m USING target t
    WHERE m.id = t.id AND (${placeholder('mayDeleteAny')}::boolean OR t.author_id = (SELECT id FROM me))
    RETURNING m.id)
  SELECT EXISTS (SELECT 1 FROM target) AS found, EXISTS (SELECT 1 FROM deleted) AS deleted, EXISTS (SELECT 1 FROM me) AS known`)

/**
 * Deletes message `id` as the caller, who may when its author or when ranked Moderator or higher
 * (SPEC 5): 404 when there is no such message, 403 when the caller may not. Null when the caller's
 * subject has no local user yet, so that it can be provisioned (SPEC 5.5) and the delete tried again.
 */
export async function deleteAs (db: Database, id: number, caller: { sub: string, role: string }): Promise<'deleted' | null> {
  const [row] = await deleteAsStatement(db, { id, subjectId: caller.sub, mayDeleteAny: hasRoleAtLeast(caller.role, 'Moderator') })
  if (row === undefined || !row.found) throw new NotFoundError('Message')
  if (row.deleted) return 'deleted'
  if (!row.known) return null
  throw new ForbiddenError()
}
