import { Type, type Static } from '@sinclair/typebox'
import { collectionQuery, pageSchema } from './pagination.js'
import { DbText } from './common.js'

export const MovieSchema = Type.Object({
  id: Type.Integer({ examples: [1] }),
  title: Type.String({ examples: ['The Matrix'] }),
  year: Type.Integer({ examples: [1999] }),
  rating: Type.Number({ examples: [8.7] }),
  genre: Type.String({ examples: ['Sci-Fi'] })
}, { $id: 'Movie', title: 'Movie', examples: [{ id: 1, title: 'The Matrix', year: 1999, rating: 8.7, genre: 'Sci-Fi' }] })

export type Movie = Static<typeof MovieSchema>

export const MOVIE_SORT_FIELDS = ['id', 'title', 'year', 'rating', 'genre'] as const
export type MovieSort = typeof MOVIE_SORT_FIELDS[number]

export const MoviePageSchema = pageSchema(MovieSchema, 'MoviePage')

export const MovieListQuery = collectionQuery(MOVIE_SORT_FIELDS, {
  genre: Type.Optional(DbText({ maxLength: 100, description: 'Only this genre (exact match)', examples: ['Drama'] })),
  year: Type.Optional(Type.Number({ description: 'Only this release year (a number that is no year matches nothing)', examples: [1994] })),
  minRating: Type.Optional(Type.Number({ description: 'Only ratings greater than or equal to this (ratings run from 0 to 10)', examples: [8.5] }))
})
export type MovieListQuery = Static<typeof MovieListQuery>
