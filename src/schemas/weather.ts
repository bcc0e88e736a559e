import { Type } from '@sinclair/typebox'

// The upstream JSON is passed through untouched, so no property is declared (the serializer
// would otherwise drop or coerce members).
export const WeatherSchema = Type.Object({}, {
  $id: 'Weather',
  title: 'Weather',
  additionalProperties: true,
  description: 'The weather upstream\'s JSON, unchanged',
  examples: [{
    coord: { lon: -0.1257, lat: 51.5085 },
    weather: [{ id: 803, main: 'Clouds', description: 'broken clouds', icon: '04d' }],
    main: { temp: 14.2, feels_like: 13.6, temp_min: 12.9, temp_max: 15.3, pressure: 1012, humidity: 72 },
    wind: { speed: 4.1, deg: 240 },
    dt: 1767268800,
    sys: { country: 'GB', sunrise: 1767254400, sunset: 1767283200 },
    timezone: 0,
    id: 2643743,
    name: 'London',
    cod: 200
  }]
})
