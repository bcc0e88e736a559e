import type { IncomingMessage, ServerResponse } from 'node:http'
import helmet, { type HelmetOptions } from 'helmet'

// One policy for the whole service. The JSON routes need nothing, and Swagger UI (/api-docs) loads
// only same-origin scripts and styles, its icons as data: URIs, and calls the API on the same origin.
// No 'unsafe-inline' and no upgrade-insecure-requests: the service itself speaks plain HTTP (TLS, if
// any, ends in front of it), and upgrading would break the docs page on http://localhost.
export const CONTENT_SECURITY_POLICY = {
  'default-src': ["'self'"],
  'base-uri': ["'self'"],
  'connect-src': ["'self'"],
  'font-src': ["'self'", 'data:'],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
  'img-src': ["'self'", 'data:'],
  'object-src': ["'none'"],
  'script-src': ["'self'"],
  'script-src-attr': ["'none'"],
  'style-src': ["'self'"]
}

/**
 * Helmet's options for that policy. `signInOrigin`: the development identity provider that signs
 * Swagger UI in. The page fetches its token endpoint (connect-src), and its sign-in popup comes back
 * to static/oauth2-redirect.html, which hands the code over through window.opener: helmet's
 * Cross-Origin-Opener-Policy same-origin would sever that link on the way back.
 */
export function helmetOptions (signInOrigin?: string): HelmetOptions {
  return {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: { ...CONTENT_SECURITY_POLICY, 'connect-src': signInOrigin === undefined ? ["'self'"] : ["'self'", signInOrigin] }
    },
    ...(signInOrigin === undefined ? {} : { crossOriginOpenerPolicy: { policy: 'unsafe-none' as const } }),
    xFrameOptions: { action: 'deny' }
  }
}

/**
 * The headers helmet sets for these options, computed once. No directive depends on the request
 * (no nonces), so every response gets the same set; @fastify/helmet instead builds the helmet
 * middleware again on every request, which was an eighth of the CPU time of `GET /health`.
 */
export function securityHeaders (options: HelmetOptions = helmetOptions()): Record<string, string> {
  const headers: Record<string, string> = {}
  const recorder = {
    setHeader (name: string, value: string | number | readonly string[]) { headers[name.toLowerCase()] = String(value) },
    removeHeader (name: string) { Reflect.deleteProperty(headers, name.toLowerCase()) }
  }
  helmet(options)({} as IncomingMessage, recorder as unknown as ServerResponse, (err?: unknown) => { if (err !== undefined) throw err })
  return headers
}

/**
 * The names of those headers. A 304 leaves them out: it only refreshes the stored 200, which keeps its
 * own (RFC 9110 15.4.5), and a revalidation is a dozen headers lighter on the wire.
 */
export const SECURITY_HEADER_NAMES: readonly string[] = Object.freeze(Object.keys(securityHeaders()))
