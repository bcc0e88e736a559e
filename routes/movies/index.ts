import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { pageLinks } from '../../src/pages/links.js'
import { readPage } from '../../src/pages/page.js'
import { createRepresentationSender } from '../../src/http-cache/representation.js'
import { MOVIE_SORT_FIELDS } from '../../src/schemas/movies.js'
import { ErrorRef, NotModified, Ref } from '../../src/schemas/common.js'
import { MovieListQuery, MoviePageSchema } from '../../src/schemas/movies.js'

const movies: FastifyPluginAsyncTypebox = async function (app) {
  const { moviesRepository } = app
  const sendList = createRepresentationSender({ cacheControl: 'no-cache' })

  app.get('/', {
    schema: {
      tags: ['movies'],
      operationId: 'listMovies',
      summary: 'List movies (the reference collection: paginated, filtered, sorted)',
      description: 'Filters combine freely; a filter with an invalid value is 400. Invalid pagination parameters fall back to their defaults.',
      querystring: MovieListQuery,
      response: { 200: Ref(MoviePageSchema), 304: NotModified, 400: ErrorRef, 500: ErrorRef }
    }
  }, async function (request, reply) {
    const query = request.query
    return sendList(request, reply, (conditional) => readPage('movies', query, MOVIE_SORT_FIELDS, (page) => moviesRepository.list(query, page, conditional)),
      (page) => ({ link: pageLinks(request.url, page) }))
  })
}

export default movies
