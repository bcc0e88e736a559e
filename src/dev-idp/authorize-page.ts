import { ROLES } from '../auth/roles.js'
import type { AuthorizationRequest, ClaimFields } from './oauth.js'

// The sign-in page of GET /authorize: plain HTML, no script and no style, every value escaped.

/** Text safe in element content and in a quoted attribute value. */
export function escapeHtml (value: string): string {
  return value.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;').replaceAll("'", '&#39;')
}

function hidden (name: string, value: string | undefined): string {
  return value === undefined ? '' : `<input type="hidden" name="${name}" value="${escapeHtml(value)}">\n`
}

function field (id: string, label: string, value: string, extra: string): string {
  return `<p><label for="${id}">${label}</label><br><input id="${id}" name="${id}" value="${escapeHtml(value)}" ${extra}></p>\n`
}

export interface AuthorizePage {
  request: AuthorizationRequest
  fields: ClaimFields
  /** Why the last submission was refused, shown above the form. */
  problems?: string[]
}

export function renderAuthorizePage ({ request, fields, problems = [] }: AuthorizePage): string {
  const options = ROLES.map((role) => `<option${role === fields.role ? ' selected' : ''}>${escapeHtml(role)}</option>`).join('')
  const alert = problems.length === 0 ? '' : `<ul role="alert">${problems.map((problem) => `<li>${escapeHtml(problem)}</li>`).join('')}</ul>\n`
  return '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n' +
    '<title>Sign in: development identity provider</title>\n</head>\n<body>\n<main>\n' +
    '<h1>Sign in</h1>\n' +
    `<p><strong>${escapeHtml(request.clientId)}</strong> asks for an access token and will get it at <code>${escapeHtml(request.redirectUri)}</code>.</p>\n` +
    '<p>This is the local development identity provider: it signs anyone in as any subject and role. Never use it in production.</p>\n' +
    alert +
    '<form method="post" action="/authorize">\n' +
    hidden('response_type', 'code') +
    hidden('client_id', request.clientId) +
    hidden('redirect_uri', request.redirectUri) +
    hidden('state', request.state) +
    hidden('scope', request.scope) +
    hidden('code_challenge', request.codeChallenge) +
    hidden('code_challenge_method', 'S256') +
    field('sub', 'Subject (sub)', fields.sub, 'required maxlength="200"') +
    `<p><label for="role">Role</label><br><select id="role" name="role">${options}</select></p>\n` +
    field('name', 'Name (optional)', fields.name, 'maxlength="200"') +
    field('email', 'Email (optional)', fields.email, 'type="email" maxlength="254"') +
    '<p><button type="submit" name="decision" value="allow">Sign in</button>\n' +
    '<button type="submit" name="decision" value="deny" formnovalidate>Cancel</button></p>\n' +
    '</form>\n</main>\n</body>\n</html>\n'
}
