import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import type { Asker } from '../db/heavy-reads.js'
import { primaryOnly, type ReadHandles } from '../db/read-router.js'
import { retrieveFailure } from '../errors.js'
import { tagFor, type Conditional, type Revalidated } from '../http-cache/entity-tag.js'
import { pageRequest, toPage, type Page } from '../pages/page.js'
import type { PageRequest } from '../pages/request.js'
import { MOVIE_PAGE_BYTES, movieBytes, pageBytes } from '../memory/budget.js'
import { VersionedCache } from '../http-cache/version-cache.js'
import { createCollectionReader } from '../pages/reader.js'
import { MOVIE_SORT_FIELDS, type Movie, type MovieListQuery, type MovieSort } from '../schemas/movies.js'
import { keyOf, MOVIE_KEYS } from '../db/triggers/counter-keys.js'
import { placeholder } from '../pages/spec.js'

export interface MovieFilters {
  genre?: string
  year?: number
  minRating?: number
}

// A year the integer column cannot hold matches no row (SPEC 4.9 rule 2), without a query.
const notAnInt4 = (value: string | number) => !Number.isInteger(value) || Math.abs(Number(value)) > 2_147_483_647

const reader = createCollectionReader<MovieSort, keyof MovieFilters, Movie>({
  table: 'movies',
  from: sql`movies m`,
  columns: sql`m.id::float8 AS id, m.title, m.year, m.rating::float8 AS rating, m.genre`,
  sorts: { id: 'm.id', title: 'm.title', year: 'm.year', rating: 'm.rating', genre: 'm.genre' },
  keys: { id: 'id', title: 'text', year: 'integer', rating: 'numeric', genre: 'text' },
  grouped: ['year', 'rating', 'genre'],
  filters: {
    genre: { condition: sql`m.genre = ${placeholder('genre')}::text`, key: keyOf(MOVIE_KEYS.genre) },
    year: { condition: sql`m.year = ${placeholder('year')}::integer`, key: keyOf(MOVIE_KEYS.year), matchesNothing: notAnInt4 },
    // SPEC 4.9: a minimum filter means greater than or equal; numeric holds any number the query can carry.
    minRating: { condition: sql`m.rating >= ${placeholder('minRating')}::numeric` }
  },
  ranked: { dims: {} }
})

const pageSize = (page: Page<Movie>) => pageBytes(page, movieBytes)
const failedRetrieving = retrieveFailure('movies')

export function createMoviesRepository (db: Database, reads: ReadHandles = primaryOnly(db)) {
  const pages = new VersionedCache<Page<Movie>>(['movies'], MOVIE_PAGE_BYTES)

  // The versions first, so a body is never older than its tag; then the remembered page or the read.
  async function listOn (target: Database, key: string, filters: MovieFilters, page: PageRequest<MovieSort>, conditional: Conditional, asker: Asker): Promise<Revalidated<Page<Movie>>> {
    const versions = await pages.versions(target)
    const { tag, match } = tagFor(versions, key, conditional)
    if (match !== false) return { tag, notModified: true }
    let value = pages.get(key, versions)
    if (value === undefined) {
      value = toPage(await reader.read(target, filters, page, asker), page)
      pages.set(key, versions, value, pageSize(value))
    }
    return { tag, notModified: false, value }
  }

  return {
    /** GET /v2/movies: the page the query asks for, or 304 when the client's copy is current; a walk is a heavy read for `asker`. */
    async listPage (query: MovieListQuery, conditional: Conditional, asker: Asker): Promise<Revalidated<Page<Movie>>> {
      const page = pageRequest('movies', query, MOVIE_SORT_FIELDS)
      const filters: MovieFilters = { genre: query.genre, year: query.year, minRating: query.minRating }
      const key = JSON.stringify([filters.genre, filters.year, filters.minRating, page])
      try {
        const on = reads.pick()
        try {
          return await listOn(on.db, key, filters, page, conditional, asker)
        } catch (err) {
          return await listOn(on.fallback(err), key, filters, page, conditional, asker)
        }
      } catch (err) {
        return failedRetrieving(err)
      }
    }
  }
}

export type MoviesRepository = ReturnType<typeof createMoviesRepository>
