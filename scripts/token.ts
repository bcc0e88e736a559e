import { parseArgs } from 'node:util'
import { Value } from '@sinclair/typebox/value'
import { ConfigError, DEV_IDP_URL, loadConfig, type AppConfig } from '../src/config.js'
import { DEFAULT_KEYS_DIR, loadOrCreateKeys } from '../src/dev-idp/keys.js'
import { mintToken, TokenRequestSchema, type TokenRequest } from '../src/dev-idp/tokens.js'

const USAGE = `Usage: npm run -s token -- --sub <subject> --role <role> [options]

Prints an access token minted by the local development identity provider (${DEV_IDP_URL}),
signed with its key pair in ${DEFAULT_KEYS_DIR}/ (created when missing). The server need not be running.

Options:
  --sub <subject>        the sub claim (required)
  --role <role>          the role claim, e.g. User, Moderator, Admin, SuperAdmin, Owner (required)
  --email <email>        the email claim (default <sub>@example.com)
  --name <name>          the name claim (default <sub>)
  --aud <audience>       the aud claim (default API_AUDIENCE, else backend-3-messages)
  --expires-in <seconds> lifetime from 1 to 86400 (default 3600)
  --keys-dir <dir>       directory of the key pair (default ${DEFAULT_KEYS_DIR})
  -h, --help             show this help

Example: TOKEN=$(npm run -s token -- --sub alice --role Admin)
`

class UsageError extends Error {}

function parseCommandLine (args: string[]): { values: Record<string, string | boolean | undefined> } {
  try {
    return parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        sub: { type: 'string' },
        role: { type: 'string' },
        email: { type: 'string' },
        name: { type: 'string' },
        aud: { type: 'string' },
        'expires-in': { type: 'string' },
        'keys-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' }
      }
    })
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
}

function expiresIn (value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  if (!/^\d+$/.test(value)) throw new UsageError('--expires-in must be a whole number of seconds')
  return Number(value)
}

function tokenRequest (values: Record<string, string | boolean | undefined>): TokenRequest {
  const text = (name: string): string | undefined => typeof values[name] === 'string' ? values[name] : undefined
  const request = Object.fromEntries(Object.entries({
    sub: text('sub'),
    role: text('role'),
    email: text('email'),
    name: text('name'),
    aud: text('aud'),
    expiresIn: expiresIn(text('expires-in'))
  }).filter(([, value]) => value !== undefined))
  for (const required of ['sub', 'role']) {
    if (request[required] === undefined) throw new UsageError(`--${required} is required`)
  }
  const error = Value.Errors(TokenRequestSchema, request).First()
  if (error !== undefined) {
    const option = error.path.slice(1).replace('expiresIn', 'expires-in')
    throw new UsageError(`--${option}: ${error.message.toLowerCase()}`)
  }
  return request as TokenRequest
}

// Only the local provider's key is at hand; a token for any other issuer would be rejected anyway.
function localIssuerConfig (): AppConfig {
  const config = loadConfig(process.env)
  if (config.authIssuer !== DEV_IDP_URL || config.production) {
    throw new ConfigError(`AUTH_ISSUER is ${config.authIssuer}${config.production ? ' with NODE_ENV=production' : ''}; ` +
      `this command mints tokens only for the local development identity provider (${DEV_IDP_URL}). ` +
      'Get a token from that identity provider instead, or unset AUTH_ISSUER.')
  }
  return config
}

async function main (args: string[]): Promise<number> {
  const { values } = parseCommandLine(args)
  if (values.help === true) {
    process.stdout.write(USAGE)
    return 0
  }
  const request = tokenRequest(values)
  const config = localIssuerConfig()
  const keysDir = typeof values['keys-dir'] === 'string' ? values['keys-dir'] : DEFAULT_KEYS_DIR
  const keys = await loadOrCreateKeys(keysDir)
  process.stdout.write(await mintToken(keys, { issuer: config.authIssuer, audience: config.apiAudience }, request) + '\n')
  return 0
}

try {
  process.exitCode = await main(process.argv.slice(2))
} catch (err) {
  process.stderr.write(`token: ${(err as Error).message}\n${err instanceof UsageError ? `\n${USAGE}` : ''}`)
  process.exitCode = 1
}
