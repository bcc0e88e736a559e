// movies: the reference collection of SPEC 4.9.
import fp from 'fastify-plugin'
import { createMoviesRepository, type MoviesRepository } from '../src/movies/repository.js'

declare module 'fastify' {
  interface FastifyInstance {
    moviesRepository: MoviesRepository
  }
}

export default fp(async function movies (app) {
  app.decorate('moviesRepository', createMoviesRepository(app.db, app.readDb))
}, { name: 'movies', fastify: '5.x', dependencies: ['db'] })
