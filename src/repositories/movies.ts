import { and, eq, gte, type SQL } from 'drizzle-orm'
import type { Database } from '../db/client.js'
import { movies, type MovieRow } from '../db/schema.js'
import { orderBy, type PageRequest } from '../lib/pagination.js'
import { countRows } from './count.js'

export type Movie = MovieRow

export interface MovieFilters {
  genre?: string
  year?: number
  minRating?: number
}

export const MOVIE_SORT_FIELDS = ['id', 'title', 'year', 'rating', 'genre'] as const
export type MovieSort = typeof MOVIE_SORT_FIELDS[number]

function filtersToWhere (filters: MovieFilters): SQL | undefined {
  return and(
    filters.genre === undefined ? undefined : eq(movies.genre, filters.genre),
    filters.year === undefined ? undefined : eq(movies.year, filters.year),
    // SPEC 4.9: a minimum filter means greater than or equal.
    filters.minRating === undefined ? undefined : gte(movies.rating, filters.minRating)
  )
}

export function createMoviesRepository (db: Database) {
  return {
    async list (filters: MovieFilters, page: PageRequest<MovieSort>): Promise<{ rows: Movie[], total: number }> {
      const where = filtersToWhere(filters)
      const [rows, total] = await Promise.all([
        db.select().from(movies).where(where)
          .orderBy(...orderBy(movies[page.sort], page.order, movies.id))
          .limit(page.limit).offset(page.offset).prepare('movies_page').execute(),
        countRows(db, movies, where, 'movies_count')
      ])
      return { rows, total }
    }
  }
}

export type MoviesRepository = ReturnType<typeof createMoviesRepository>
