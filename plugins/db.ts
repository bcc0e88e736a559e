// db: the Drizzle handle, the repositories built on it, and the readiness probe.
import { sql } from 'drizzle-orm'
import fp from 'fastify-plugin'
import { createDb, type Database, type DbOptions } from '../src/db/client.js'
import { createMessagesRepository, type MessagesRepository } from '../src/repositories/messages.js'
import { createMoviesRepository, type MoviesRepository } from '../src/repositories/movies.js'
import { createUsersRepository, type UsersRepository } from '../src/repositories/users.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Database
    messagesRepository: MessagesRepository
    moviesRepository: MoviesRepository
    usersRepository: UsersRepository
    /** Resolves when the database answers a trivial query. */
    pingDatabase: () => Promise<void>
  }
}

export interface DbPluginOptions extends DbOptions {
  /** Apply pending migrations before the app accepts requests (default true). */
  migrate?: boolean
}

export default fp<DbPluginOptions>(async function db (app, opts) {
  const handle = await createDb(opts)
  if (opts.migrate !== false) {
    try {
      await handle.migrate()
    } catch (err) {
      await handle.close()
      throw err
    }
  }
  app.addHook('onClose', async () => { await handle.close() })
  app.log.debug({ driver: handle.driver }, 'database ready')

  app.decorate('db', handle.db)
  app.decorate('messagesRepository', createMessagesRepository(handle.db))
  app.decorate('moviesRepository', createMoviesRepository(handle.db))
  app.decorate('usersRepository', createUsersRepository(handle.db))
  app.decorate('pingDatabase', async () => { await handle.db.execute(sql`select 1`) })
}, { name: 'db', fastify: '5.x' })
