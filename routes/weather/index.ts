import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { createWeatherService, type WeatherServiceOptions } from '../../src/upstream/weather-service.js'
import { bearerAuth, ErrorRef, Ref } from '../../src/schemas/common.js'
import { WeatherSchema } from '../../src/schemas/weather.js'

/** An unset or blank WEATHER_API_KEY makes every route of the router answer 500. */
export type WeatherRoutesOptions = WeatherServiceOptions

const CITY = { maxLength: 200, description: 'City name, optionally with a country code', examples: ['London,GB'] }

const WeatherQuery = Type.Object({ city: Type.Optional(Type.String(CITY)) })
const WeatherParams = Type.Object({ city: Type.String(CITY) })

// 3xx/4xx/5xx other than the named ones are upstream statuses mirrored with { error } (SPEC 4.8).
const responses = {
  200: Ref(WeatherSchema),
  '3xx': ErrorRef,
  400: ErrorRef,
  401: ErrorRef,
  '4xx': ErrorRef,
  500: ErrorRef,
  502: ErrorRef,
  '5xx': ErrorRef
}

// SPEC 4.8 / CONTRACT 6: the weather proxy. Config arrives as options; nothing here reads process.env.
const weather: FastifyPluginAsyncTypebox<WeatherRoutesOptions> = async function (app, opts) {
  const weatherService = createWeatherService(opts)
  app.addHook('onClose', async () => await weatherService.close())

  // Plugin-level hooks run before route-level ones, so an unset key answers 500 before
  // authentication is even attempted (CONTRACT 6).
  app.addHook('onRequest', async function () {
    weatherService.assertConfigured()
  })

  app.get('/', {
    onRequest: app.authenticate,
    schema: {
      tags: ['weather'],
      operationId: 'getWeather',
      summary: 'Current weather for a city given in the query',
      description: 'The upstream\'s JSON for `city`, unchanged. A missing or blank `city` is 400; an upstream failure is mirrored or 502.',
      security: bearerAuth,
      querystring: WeatherQuery,
      response: responses
    }
  }, async function (request) {
    return await weatherService.current(request.query.city)
  })

  app.get('/:city', {
    onRequest: app.authenticate,
    schema: {
      tags: ['weather'],
      operationId: 'getCityWeather',
      summary: 'Current weather for a city given in the path',
      description: 'The upstream\'s JSON for the city, unchanged; an upstream failure is mirrored or 502.',
      security: bearerAuth,
      params: WeatherParams,
      response: responses
    }
  }, async function (request) {
    return await weatherService.current(request.params.city)
  })
}

export default weather
