/**
 * Helmet's Cross-Origin-Resource-Policy is same-origin; a response that CORS admits (it carries
 * Access-Control-Allow-Origin) is relaxed to cross-origin, so the listed origin can read it. Used by
 * plugins/cors.ts as each response is sent, and by the event stream, which writes its own head.
 */
export function resourcePolicyFor (allowOrigin: unknown): 'cross-origin' | undefined {
  return allowOrigin === undefined ? undefined : 'cross-origin'
}
