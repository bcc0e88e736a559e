import fengari from 'fengari'
import { readFile } from 'node:fs/promises'
import { request } from 'undici'

// A wrk script run as wrk runs it, one thread, in a Lua 5.3 VM from npm (fengari): wrk's own calls
// (setup, init, request, response, done) and the API scripts use (wrk.format, thread:get and :set,
// wrk.thread:stop, the summary and latency done() reads), each request sent to a real server over
// HTTP. So a script is checked on every machine, whether wrk is installed or not.

const { lua, lauxlib, lualib, to_luastring: luaString, to_jsstring: jsString } = fengari

// wrk's side of the API, in Lua: one thread, whose variables are the script's globals.
const PRELUDE = `
__out = ''
io.write = function (...) for _, s in ipairs({ ... }) do __out = __out .. tostring(s) end end
__stopped = false
__thread = { set = function (_, name, value) _G[name] = value end, get = function (_, name) return _G[name] end }
wrk = { thread = { stop = function () __stopped = true end } }
function wrk.format (method, path, headers)
  local lines = { method .. ' ' .. path .. ' HTTP/1.1' }
  for name, value in pairs(headers or {}) do table.insert(lines, name .. ': ' .. value) end
  return table.concat(lines, '\\r\\n') .. '\\r\\n\\r\\n'
end
function __done (errors, p50, p99)
  local latency = { percentile = function (_, p) return p == 50 and p50 or p99 end }
  done({ errors = { connect = errors, read = 0, write = 0, timeout = 0 } }, latency)
end
`

export interface WrkRun {
  /** What the script wrote (its io.write), as wrk would print it after its own summary. */
  output: string
  /** The paths requested, in order. */
  paths: string[]
}

function check (L: object, status: number, what: string): void {
  if (status !== lua.LUA_OK) throw new Error(`${what}: ${jsString(lua.lua_tostring(L, -1))}`)
}

/** Runs `script` against `base` with `args` (wrk's arguments after `--`) for at most `requests` answers. */
export async function runWrkScript (script: string, base: string, args: string[], requests: number): Promise<WrkRun> {
  const L = lauxlib.luaL_newstate()
  lualib.luaL_openlibs(L)
  check(L, lauxlib.luaL_dostring(L, luaString(PRELUDE)), 'prelude')
  check(L, lauxlib.luaL_dostring(L, luaString(await readFile(script, 'utf8'))), script)
  const call = (name: string, push: () => number, results = 0): void => {
    lua.lua_getglobal(L, luaString(name))
    check(L, lua.lua_pcall(L, push(), results, 0), name)
  }
  call('setup', () => { lua.lua_getglobal(L, luaString('__thread')); return 1 })
  call('init', () => {
    lua.lua_createtable(L, args.length, 0)
    args.forEach((arg, i) => { lua.lua_pushstring(L, luaString(arg)); lua.lua_rawseti(L, -2, i + 1) })
    return 1
  })
  const paths: string[] = []
  let errors = 0
  const times: number[] = []
  for (let i = 0; i < requests; i++) {
    call('request', () => 0, 1)
    const raw = jsString(lua.lua_tostring(L, -1))
    lua.lua_pop(L, 1)
    const [start = '', ...lines] = raw.split('\r\n').filter((line) => line !== '')
    const [method, path] = start.split(' ') as [string, string]
    const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()]))
    paths.push(path)
    const began = performance.now()
    let answer: Awaited<ReturnType<typeof request>>
    try {
      answer = await request(new URL(path, base), { method: method as 'GET', headers, headersTimeout: 10_000, bodyTimeout: 10_000 })
      await answer.body.dump()
    } catch {
      errors++
      continue
    }
    times.push(performance.now() - began)
    call('response', () => {
      lua.lua_pushinteger(L, answer.statusCode)
      lua.lua_createtable(L, 0, 0)
      for (const [name, value] of Object.entries(answer.headers)) {
        lua.lua_pushstring(L, luaString(String(value)))
        lua.lua_setfield(L, -2, luaString(name))
      }
      return 2
    })
    lua.lua_getglobal(L, luaString('__stopped'))
    const stopped = lua.lua_toboolean(L, -1)
    lua.lua_pop(L, 1)
    if (stopped) break
  }
  times.sort((a, b) => a - b)
  const at = (p: number): number => (times[Math.min(times.length - 1, Math.floor(times.length * p / 100))] ?? 0) * 1000
  call('__done', () => { lua.lua_pushinteger(L, errors); lua.lua_pushnumber(L, at(50)); lua.lua_pushnumber(L, at(99)); return 3 })
  lua.lua_getglobal(L, luaString('__out'))
  const output = jsString(lua.lua_tostring(L, -1))
  return { output, paths }
}
