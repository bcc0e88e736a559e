// The hosts of a connection string in libpq's multi-host form (CONTRACT 14):
// postgres://user@db1:5432,db2:5432/messages?target_session_attrs=read-write

export interface Host { host: string, port: number }

export interface HostList {
  hosts: Host[]
  /** The same connection string naming one host, without target_session_attrs: probes reach standbys too. */
  urlOf: (host: Host) => string
}

const URL_PARTS = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/
const DEFAULT_PORT = 5432

function parseHost (text: string, defaultPort: number): Host {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text)
  if (bracketed !== null) return { host: bracketed[1] ?? '', port: Number(bracketed[2] ?? defaultPort) }
  const [host = '', port] = text.split(':')
  return { host: host === '' ? 'localhost' : decodeURIComponent(host), port: port === undefined || port === '' ? defaultPort : Number(port) }
}

const formatHost = ({ host, port }: Host): string => `${host.includes(':') ? `[${host}]` : encodeURIComponent(host)}:${port}`

/** Splits a postgres:// URL into its hosts; a URL with one host gives a list of one. */
export function parseHosts (url: string): HostList {
  const match = URL_PARTS.exec(url)
  if (match === null) throw new Error('not a postgres:// URL')
  const [, scheme = '', auth = '', hostPart = '', rest = ''] = match
  const [path = '', query = ''] = rest.split('?', 2)
  const params = new URLSearchParams(query)
  const defaultPort = Number(params.get('port') ?? DEFAULT_PORT)
  params.delete('port')
  params.delete('target_session_attrs')
  const left = params.toString()
  const hosts = (hostPart === '' ? ['localhost'] : hostPart.split(',')).map((text) => parseHost(text, defaultPort))
  if (hosts.some(({ port }) => !Number.isInteger(port) || port <= 0 || port > 65_535)) throw new Error('invalid port in the database URL')
  return {
    hosts,
    urlOf: (host) => `${scheme}${auth}${formatHost(host)}${path}${left === '' ? '' : `?${left}`}`
  }
}

/** Splits a comma-separated list of URLs, each of which may itself list several hosts with commas. */
export function splitUrls (list: string): string[] {
  return list.split(/,(?=\s*postgres(?:ql)?:\/\/)/).map((url) => url.trim()).filter((url) => url !== '')
}
