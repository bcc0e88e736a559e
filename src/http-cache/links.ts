/** What a page's links follow from: its pagination (src/pages/page.ts). */
export interface PageLinksOf {
  pagination: { page: number | null, totalPages: number, nextCursor: string | null, prevCursor: string | null }
}

// RFC 8288 `Link` for a collection page (CONTRACT 12): relative references that keep every query
// parameter of the request, except the ones that choose the page.
const PAGE_CHOOSERS = new Set(['page', 'after', 'before'])

// CONTRACT 16: the header is the service's own. What may stay as the client sent it: RFC 3986's
// unreserved characters, its sub-delimiters but ',' and ';' (which separate links and their
// parameters; a URI may hold them raw, so the request target still can), ':', '@', '/', '?', and a
// '%' that begins a percent-encoded octet. Anything else ('<', '>', '"', ',', ';', spaces, a stray
// '%', any other character) is percent-encoded: the query parser reads the same parameter from it,
// and it can end no reference and add no link, relation or parameter.
const ENCODED = /%(?![0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~!$&'()*+=:@/?%]/gu

const encodeOne = (character: string): string => character === '%' ? '%25' : encodeURIComponent(character.toWellFormed())

/** A part of the request target as it may stand inside `<…>` of a Link header, meaning the same to the router and the query parser. */
function referenceText (text: string): string {
  return text.replace(ENCODED, encodeOne)
}

function parameterName (pair: string): string {
  const name = pair.split('=', 1)[0]!.replace(/\+/g, ' ')
  try {
    return decodeURIComponent(name)
  } catch {
    return name
  }
}

/** The `Link` header value for `page`, answered to a request for `url` (path and query). */
export function pageLinks (url: string, page: PageLinksOf): string {
  const mark = url.indexOf('?')
  const path = referenceText(mark === -1 ? url : url.slice(0, mark))
  const kept = mark === -1 ? [] : url.slice(mark + 1).split('&').filter((pair) => pair !== '' && !PAGE_CHOOSERS.has(parameterName(pair))).map(referenceText)
  const link = (rel: string, chooser?: string) => {
    const query = chooser === undefined ? kept : [...kept, chooser]
    return `<${query.length === 0 ? path : `${path}?${query.join('&')}`}>; rel="${rel}"`
  }
  const { page: number, totalPages, nextCursor, prevCursor } = page.pagination
  const links: string[] = []
  if (number === null) {
    links.push(link('first'))
    if (prevCursor !== null) links.push(link('prev', `before=${prevCursor}`))
    if (nextCursor !== null) links.push(link('next', `after=${nextCursor}`))
    return links.join(', ')
  }
  // An empty collection still has one page, the first; a page past the end leads back to the last.
  const last = Math.max(totalPages, 1)
  links.push(link('first', 'page=1'))
  if (number > 1) links.push(link('prev', `page=${Math.min(number - 1, last)}`))
  if (number < totalPages) links.push(link('next', `page=${number + 1}`))
  links.push(link('last', `page=${last}`))
  return links.join(', ')
}
