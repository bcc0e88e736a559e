// The project's Markdown, read the way GitHub renders it, for the tests of the documents (test/docs/):
// headings and their anchors, links, and tables. Text inside fenced code blocks is neither a heading
// nor a link.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** README.md, bench/README.md, src/pages/README.md and every .md under docs/, as paths relative to the project root. */
export function documents (): string[] {
  const under = (dir: string): string[] => readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? under(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : [])
  return ['README.md', 'bench/README.md', 'src/pages/README.md', ...under('docs')].map((path) => relative(ROOT, join(ROOT, path)))
}

export const readDocument = (path: string): string => readFileSync(join(ROOT, path), 'utf8')

/** The lines of a document outside fenced code blocks, each with its 1-based line number. */
export function proseLines (markdown: string): Array<{ line: number, text: string }> {
  const lines: Array<{ line: number, text: string }> = []
  let fence: string | null = null
  markdown.split('\n').forEach((text, i) => {
    const marker = /^\s*(```+|~~~+)/.exec(text)?.[1]
    if (marker !== undefined) {
      if (fence === null) fence = marker[0]!.repeat(marker.length)
      else if (marker.startsWith(fence)) fence = null
      return
    }
    if (fence === null) lines.push({ line: i + 1, text })
  })
  return lines
}

/** A heading's text as GitHub shows it: inline code, emphasis, links and images reduced to their text. */
function headingText (source: string): string {
  return source
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/(\*\*|__|\*)/g, '')
    .trim()
}

/**
 * GitHub's anchor for a heading: lower case, every character that is not a letter, a mark, a digit,
 * a connector (`_`), a hyphen or a space left out, spaces made hyphens. The n-th repeat of a slug
 * in one document gets `-n`.
 */
export function slug (text: string): string {
  return headingText(text).toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '').replace(/ /g, '-')
}

/** Every anchor a document defines: its headings' slugs (repeats numbered) and explicit `<a id>`/`<a name>`. */
export function anchors (markdown: string): Set<string> {
  const found = new Set<string>()
  const seen = new Map<string, number>()
  for (const { text } of proseLines(markdown)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)?.[1]
    if (heading !== undefined) {
      const base = slug(heading)
      const count = seen.get(base) ?? 0
      seen.set(base, count + 1)
      found.add(count === 0 ? base : `${base}-${count}`)
    }
    for (const match of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(match[1]!)
  }
  return found
}

export interface Link { line: number, target: string }

/** Inline links and images (`[text](target)`, `![alt](target)`) and reference definitions, outside code. */
export function links (markdown: string): Link[] {
  const found: Link[] = []
  for (const { line, text } of proseLines(markdown)) {
    const prose = text.replace(/`[^`]*`/g, '')
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) found.push({ line, target: match[1]! })
    const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(prose)
    if (definition !== null) found.push({ line, target: definition[1]! })
  }
  return found
}

/** The rows of every pipe table in a document, each as its trimmed cells, header and separator rows left out. */
export function tableRows (markdown: string): string[][] {
  const rows: string[][] = []
  for (const { text } of proseLines(markdown)) {
    if (!/^\s*\|/.test(text)) continue
    const cells = text.trim().replace(/^\||\|$/g, '').split(/(?<!\\)\|/).map((cell) => cell.trim())
    if (cells.every((cell) => /^:?-+:?$/.test(cell))) {
      rows.pop()
      continue
    }
    rows.push(cells)
  }
  return rows
}
