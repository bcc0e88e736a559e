import { isUtf8 } from 'node:buffer'

// CONTRACT 16: the request target every route, hook and header works from is a well-formed URI.
// Percent-encoding that is not UTF-8 (`%ED%A0%80`, an encoded surrogate) or a stray `%` (`%zz`) would
// make the router give up with a generic 400 before any route sees it; read as a browser's URL parser
// reads it, every route answers such a value with its own rule (`Parameter "id" must be a positive
// integer`). A character no URI may hold raw (`<`, `>`, `"`, `{`, a space from inject) is
// percent-encoded, so what is built from the target (Link, a redirect's Location) holds none of them.

// What stays as it came: RFC 3986's unreserved and sub-delimiter characters, and those of a path
// and a query. Anything else is a run of percent-encoded octets, a stray `%`, or a character to encode.
const PLAIN = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/?]*$/
const TO_ENCODE = /(?:%[0-9A-Fa-f]{2})+|%|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?]/gu

const escapeOctet = (octet: number): string => `%${octet.toString(16).toUpperCase().padStart(2, '0')}`

/**
 * A run of octets as UTF-8 with each invalid sequence replaced by U+FFFD (WHATWG's decoder, as
 * URLSearchParams reads a query), encoded again: ASCII as the escapes they were, so an encoded `/`,
 * `?` or `&` stays a character of its segment or value. A valid run is kept as it came.
 */
function wellFormedRun (run: string): string {
  const octets = Buffer.from(run.replaceAll('%', ''), 'hex')
  if (isUtf8(octets)) return run
  let text = ''
  for (const character of new TextDecoder().decode(octets)) {
    text += character.length === 1 && character.charCodeAt(0) < 0x80 ? escapeOctet(character.charCodeAt(0)) : encodeURIComponent(character)
  }
  return text
}

function wellFormed (match: string): string {
  if (match === '%') return '%25'
  if (match.startsWith('%')) return wellFormedRun(match)
  return encodeURIComponent(match.toWellFormed())
}

/** The request target as a well-formed URI that means the same to the router and the query parser. */
export function wellFormedUrl (url: string): string {
  return PLAIN.test(url) ? url : url.replace(TO_ENCODE, wellFormed)
}
