// fengari ships no types: the few calls test/helpers/wrk-script.ts makes of its C-like Lua API.
declare module 'fengari' {
  type State = object
  type LuaString = Uint8Array
  const fengari: {
    to_luastring: (text: string) => LuaString
    to_jsstring: (text: LuaString) => string
    lua: {
      LUA_OK: number
      lua_getglobal: (L: State, name: LuaString) => number
      lua_pcall: (L: State, args: number, results: number, handler: number) => number
      lua_tostring: (L: State, index: number) => LuaString
      lua_toboolean: (L: State, index: number) => boolean
      lua_pop: (L: State, n: number) => void
      lua_pushstring: (L: State, text: LuaString) => void
      lua_pushinteger: (L: State, n: number) => void
      lua_pushnumber: (L: State, n: number) => void
      lua_createtable: (L: State, array: number, fields: number) => void
      lua_rawseti: (L: State, index: number, n: number) => void
      lua_setfield: (L: State, index: number, name: LuaString) => void
    }
    lauxlib: {
      luaL_newstate: () => State
      luaL_dostring: (L: State, source: LuaString) => number
    }
    lualib: { luaL_openlibs: (L: State) => void }
  }
  export default fengari
}
