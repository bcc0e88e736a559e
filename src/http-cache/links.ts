/** What a page's links follow from: its pagination (src/pages/page.ts). */
export interface PageLinksOf {
  pagination: { page: number | null, totalPages: number, nextCursor: string | null, prevCursor: string | null }
}

// RFC 8288 `Link` for a collection page (CONTRACT 12): relative references that keep every query
// parameter of the request as it was sent, except the ones that choose the page.
const PAGE_CHOOSERS = new Set(['page', 'after', 'before'])

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
  const path = mark === -1 ? url : url.slice(0, mark)
  const kept = mark === -1 ? [] : url.slice(mark + 1).split('&').filter((pair) => pair !== '' && !PAGE_CHOOSERS.has(parameterName(pair)))
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
