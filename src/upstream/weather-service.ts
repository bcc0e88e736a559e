import { MissingQueryError, NotConfiguredError } from '../errors.js'
import { createWeatherClient, type WeatherClient } from './weather-client.js'

export interface WeatherServiceOptions {
  /** WEATHER_API_KEY; unset or blank leaves the service unconfigured. */
  apiKey?: string | undefined
  /** WEATHER_API_URL. */
  url: string
  /** Upstream budget; 5 s unless a test needs it shorter. */
  timeoutMs?: number | undefined
}

/**
 * The weather proxy of SPEC 4.8 / CONTRACT 6: the upstream's JSON for a city, unchanged. Without a key
 * every use is 500 `WEATHER_API_KEY is not configured`.
 */
export function createWeatherService (options: WeatherServiceOptions) {
  const apiKey = options.apiKey?.trim() === '' ? undefined : options.apiKey
  const client = apiKey === undefined ? undefined : createWeatherClient({ url: options.url, apiKey, timeoutMs: options.timeoutMs })

  function configuredClient (): WeatherClient {
    if (client === undefined) throw new NotConfiguredError('WEATHER_API_KEY')
    return client
  }

  return {
    /** Throws the 500 when no key is configured. */
    assertConfigured (): void {
      configuredClient()
    },

    /** The current weather for `city`; a missing or blank city is 400, an upstream failure mirrored or 502. */
    async current (city: string | undefined): Promise<Record<string, unknown>> {
      if (city === undefined || city.trim() === '') throw new MissingQueryError('city')
      const { body } = await configuredClient().current(city)
      return body
    },

    async close (): Promise<void> {
      await client?.close()
    }
  }
}

export type WeatherService = ReturnType<typeof createWeatherService>
