import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { askerOf } from '../../src/http/asker.js'
import { expensiveReadUnavailable } from '../../src/openapi/document.js'
import { ErrorRef, NotModified, Ref } from '../../src/schemas/common.js'
import { MovieListQuery, MoviePageSchema } from '../../src/schemas/movies.js'

const movies: FastifyPluginAsyncTypebox = async function (app) {
  const { moviesRepository } = app

  app.get('/', {
    config: { representation: { cacheControl: 'no-cache', links: true } },
    schema: {
      tags: ['movies'],
      operationId: 'listMovies',
      summary: 'List movies (the reference collection: paginated, filtered, sorted)',
      description: 'Filters combine freely; a filter with an invalid value is 400. Invalid pagination parameters fall back to their defaults.',
      querystring: MovieListQuery,
      response: { 200: Ref(MoviePageSchema), 304: NotModified, 400: ErrorRef, 500: ErrorRef, 503: expensiveReadUnavailable(ErrorRef) }
    }
  }, async function (request, reply) {
    // Who asks, for the admission of a deep page the database must walk (CONTRACT 16).
    const asker = askerOf(request)
    return reply.represent(await moviesRepository.listPage(request.query, request.conditional(), asker))
  })
}

export default movies
