import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, relative } from 'node:path'
import t from 'tap'
import ts from 'typescript'

// Per request, each folder is entered once, going down (docs/architecture.md, "One request, route to database"). Imports already
// point down (.dependency-cruiser.cjs), but a lower module can still call a higher one through a function
// it is handed: the read router that ran a repository's closure, the version cache that ran its compute,
// the idempotency wrapper that ran the route's create. An import graph cannot see that, so this test reads
// every call from one folder into another, and finds the arguments that are functions.

const ROOT = join(import.meta.dirname, '..', '..')

/**
 * The calls that hand a function to another folder, each with why it is no call back up in a request.
 * Add one only with a reason; one that is gone must leave the list too (the second test says so).
 */
const ALLOWED: Record<string, string> = {
  'plugins → src/db/upkeep.ts every': 'a timer runs the plugin\'s periodic job, outside any request',
  'src/idempotency → src/db/batches.ts inBatches': 'pruning in bounded batches, on a timer, outside any request',
  'src/changes → src/db/batches.ts inBatches': 'pruning of the change log in bounded batches, on a timer, outside any request',
  'src/changes → src/db/failover/elector.ts onChange': 'a listener told when the primary changes, outside any request',
  'src/changes → src/db/shared-read.ts sharedRead': 'one read of the change feed\'s head shared by every poll, built once at load',
  'src/changes → src/db/shared-read.ts sharedReadByKey()': 'one answer shared by the polls of one position',
  'src/pages → src/db/heavy-reads.ts heavyRead': 'admission of an expensive read (CONTRACT 16): the read runs when its turn comes',
  'src/messages → src/db/heavy-reads.ts heavyRead': 'admission of a term\'s read (CONTRACT 16)',
  'src/messages → src/db/heavy-reads.ts heavyReadWithMemory': 'admission of a term\'s read with the memory it may use (CONTRACT 16)',
  'src/messages → src/db/heavy-reads.ts unlessGone': 'told when the client of a shared term read has gone (CONTRACT 16)',
  'plugins → src/db/read-router.ts createReadRouter': 'tells the plugin\'s log of a replica that failed a read',
  'plugins → src/changes/live/delivery.ts createLiveDelivery': 'tells the plugin\'s log and metrics how live delivery fares',
  'plugins → src/http-cache/representation.ts createRepresentation': 'a test\'s counting compressor, when it gives one; else the cache\'s own',
  'src/users → src/tracing/steps.ts inStepSpan': 'a span around provisioning (CONTRACT 15): the step runs at once, inside it'
}

// The layers of src/, lowest first, read from the layer rules of .dependency-cruiser.cjs (`^src/(a|b)/`);
// plugins and routes sit on top.
const { forbidden } = createRequire(import.meta.url)('../../.dependency-cruiser.cjs') as { forbidden: Array<{ name: string, from: { path?: string } }> }
const LAYERS = forbidden.filter((rule) => rule.name.startsWith('layer-'))
  .map((rule) => /^\^src\/\((.*)\)\/$/.exec(rule.from.path ?? '')?.[1]?.split('|') ?? [])
const RANKS = new Map<string, number>([
  ...LAYERS.flatMap((folders, rank) => folders.map((folder): [string, number] => [`src/${folder}`, rank])),
  ['plugins', LAYERS.length],
  ['routes', LAYERS.length + 1]
])
// src/config.ts and src/errors.ts sit below everything; src/app.ts wires the plugins.
const rankOf = (folder: string): number => RANKS.get(folder) ?? (folder === 'src' ? -1 : LAYERS.length)

/** The folder a module belongs to: a capability under src/, or plugins/, routes/, src/ itself. */
function folderOf (file: string): string {
  const parts = relative(ROOT, file).split('/')
  return parts[0] === 'src' && parts.length > 2 ? `src/${parts[1]}` : parts[0]!
}

const files = ['src', 'plugins', 'routes'].flatMap((folder) => readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' })
  .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'))
  .map((name) => join(ROOT, folder, name)))
const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })
const program = ts.createProgram(files, config?.options ?? {})
const checker = program.getTypeChecker()

// A prepared statement is the database layer's own function: running one goes down, never up.
const isStatement = (type: ts.Type): boolean => type.aliasSymbol?.name === 'Statement'
const isFunction = (type: ts.Type): boolean =>
  !isStatement(type) && (type.getCallSignatures().length > 0 || (type.isUnion() && type.types.some(isFunction)))

/** The folder a function given as `value` lives in: where it is declared, or where it is written. */
function homeOf (value: ts.Expression, written: string): string {
  let symbol = ts.isIdentifier(value) || ts.isPropertyAccessExpression(value) ? checker.getSymbolAtLocation(value) : undefined
  if (symbol !== undefined && (symbol.flags & ts.SymbolFlags.Alias) !== 0) symbol = checker.getAliasedSymbol(symbol)
  const file = symbol?.declarations?.[0]?.getSourceFile().fileName
  return file === undefined ? written : folderOf(file)
}

/**
 * The functions `argument` hands over, directly or as members of an object literal, whose home is
 * not below the callee's folder: the callee would call up into them. One of a lower folder (a
 * repository's lookup wired into a higher one) is a call down.
 */
function handsUp (argument: ts.Expression, calleeFolder: string, written: string): boolean {
  const values = ts.isObjectLiteralExpression(argument)
    ? argument.properties.flatMap((member) => ts.isPropertyAssignment(member) ? [member.initializer] : ts.isShorthandPropertyAssignment(member) ? [member.name] : [])
    : [argument]
  const methods = ts.isObjectLiteralExpression(argument) && argument.properties.some(ts.isMethodDeclaration)
  return (methods && rankOf(written) >= rankOf(calleeFolder)) || values.some((value) => {
    if (!isFunction(checker.getTypeAtLocation(value))) return false
    const home = homeOf(value, written)
    return home !== calleeFolder && rankOf(home) >= rankOf(calleeFolder)
  })
}

/**
 * Where `call` goes, when that is a module of the project's own: the declaration of the function
 * called, or, for a value of a declared function type (a router handed in), of that type.
 */
function calleeOf (call: ts.CallExpression | ts.NewExpression): { file: string, name: string } | undefined {
  const target = ts.isPropertyAccessExpression(call.expression) ? call.expression.name : call.expression
  let symbol = checker.getSymbolAtLocation(target)
  if (symbol !== undefined && (symbol.flags & ts.SymbolFlags.Alias) !== 0) symbol = checker.getAliasedSymbol(symbol)
  const declaration = symbol?.declarations?.[0]
  const ofType = (): ts.Symbol | undefined => {
    const type = checker.getTypeAtLocation(call.expression)
    return type.aliasSymbol ?? type.getSymbol()
  }
  const named = declaration !== undefined && (ts.isParameter(declaration) || ts.isVariableDeclaration(declaration) || ts.isBindingElement(declaration))
    ? ofType() ?? symbol
    : symbol
  const declared = named?.declarations?.[0]
  const file = declared?.getSourceFile().fileName
  if (named === undefined || declared === undefined || file === undefined || !files.includes(file)) return undefined
  // A function type written in place (what a factory returns) is named for the factory.
  let name = named.name
  for (let node: ts.Node | undefined = declared; name.startsWith('__') && node !== undefined; node = node.parent) {
    if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node)) && node.name !== undefined) name = `${node.name.getText()}()`
  }
  return { file, name }
}

const found = new Set<string>()
for (const file of files) {
  const source = program.getSourceFile(file)
  if (source === undefined) continue
  const from = folderOf(file)
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) || ts.isNewExpression(node)) {
      const callee = calleeOf(node)
      if (callee !== undefined && folderOf(callee.file) !== from &&
        (node.arguments ?? []).some((argument) => handsUp(argument, folderOf(callee.file), from))) {
        found.add(`${from} → ${relative(ROOT, callee.file)} ${callee.name}`)
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
}

t.test('no call hands another folder a function, but the listed ones', async (t) => {
  t.same([...found].filter((call) => ALLOWED[call] === undefined).sort(), [],
    'a function handed to another folder is called back from there: pass values down instead, or list it with its reason')
})

t.test('every listed call still exists', async (t) => {
  t.same(Object.keys(ALLOWED).filter((call) => !found.has(call)).sort(), [], 'gone: remove it from ALLOWED')
})
