import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { MissingQueryError, NotConfiguredError } from '../../src/errors.js'
import { createWeatherClient, type WeatherClient } from '../../src/upstream/weather-client.js'
import { bearerAuth, ErrorRef, Ref } from '../../src/schemas/common.js'
import { WeatherSchema } from '../../src/schemas/weather.js'

export interface WeatherRoutesOptions {
  /** WEATHER_API_KEY; unset or blank makes every route of the router answer 500. */
  apiKey?: string | undefined
  /** WEATHER_API_URL. */
  url: string
  /** Upstream budget; 5 s unless a test needs it shorter. */
  timeoutMs?: number | undefined
}

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
  const apiKey = opts.apiKey?.trim() === '' ? undefined : opts.apiKey
  const client = apiKey === undefined ? undefined : createWeatherClient({ url: opts.url, apiKey, timeoutMs: opts.timeoutMs })
  if (client !== undefined) app.addHook('onClose', async () => await client.close())

  function configuredClient (): WeatherClient {
    if (client === undefined) throw new NotConfiguredError('WEATHER_API_KEY')
    return client
  }

  // Plugin-level hooks run before route-level ones, so an unset key answers 500 before
  // authentication is even attempted (CONTRACT 6).
  app.addHook('onRequest', async function () {
    configuredClient()
  })

  async function lookup (city: string | undefined): Promise<Record<string, unknown>> {
    if (city === undefined || city.trim() === '') throw new MissingQueryError('city')
    const { body } = await configuredClient().current(city)
    return body
  }

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
    return await lookup(request.query.city)
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
    return await lookup(request.params.city)
  })
}

export default weather
