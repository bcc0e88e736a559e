// Import rules for the source tree, checked by `npm run lint` (depcruise).
//
// src/ holds one folder per capability. The rules below keep the folders
// layered so each one can be read, tested and changed on its own:
//
//   src/db            storage: schema, client, statements, counters, change log
//   src/schemas       TypeBox wire schemas (may read enum lists in src/db/schema.ts)
//   src/memory        sized LRU and memory budget
//   src/http-cache    versions, ETags, representations
//   src/pages         collection convention and exact pages
//   entity and feature folders (messages, users, movies, sync, search, idempotency)
//   src/tracing       OpenTelemetry (CONTRACT 15): the SDK and its settings, and the few calls
//                     capabilities make to report their own steps (provisioning, the page cache,
//                     live delivery); built on src/db only
//   plugins/, routes/ Fastify wiring; src/app.ts and src/server.ts register them
//
// Paths in the rules are regular expressions matched against paths relative
// to the repository root, e.g. 'src/pages/reader.ts'.

/** Folders allowed directly under src/. Add a line here for a new capability. */
const CAPABILITY_FOLDERS = [
  'auth',
  'changes',
  'db',
  'dev-idp',
  'http',
  'http-cache',
  'idempotency',
  'load-shedding',
  'logging',
  'memory',
  'messages',
  'movies',
  'openapi',
  'pages',
  'schemas',
  'search',
  // OpenTelemetry: the SDK (plugins/tracing.ts and src/app.ts start it), its OTEL_* settings
  // (src/config.ts), and the calls capabilities make to report their own steps. It imports
  // src/db/ only (statement spans), so any capability may call it.
  'tracing',
  'upstream',
  'users'
]

/**
 * Which capability may use which, written once: from the bottom up, a folder under src/ may import
 * only the folders of the layers before its own, never one of its own layer or above. So every import
 * between folders points down, and no two folders can depend on each other, even through others.
 *
 *   db            storage: the drivers, statements, counters, the change log, failover
 *   tracing       spans for the steps of every capability (marks the database's statements)
 *   leaves        wire schemas, memory bounds, HTTP helpers, logging, load shedding, the weather upstream
 *   http-cache    versions, ETags, representations; auth: tokens, keys, roles, userinfo; the OpenAPI
 *                 document's shared parts (from the schemas)
 *   pages         the collection convention; search: term matching; idempotency; the dev identity provider
 *   users, movies entities built on pages
 *   messages      the messages, built on pages, search, idempotency and roles
 *   changes       the change feed of the messages, and its live delivery
 */
const LAYERS = [
  ['db'],
  ['tracing'],
  ['schemas', 'memory', 'http', 'logging', 'load-shedding', 'upstream'],
  ['http-cache', 'auth', 'openapi'],
  ['pages', 'search', 'idempotency', 'dev-idp'],
  ['users', 'movies'],
  ['messages'],
  ['changes']
]

/**
 * One rule per layer: its folders import nothing of their own layer (but themselves) or above. Imports
 * cannot show a call back up through a function handed down; test/app/calls-go-down.test.ts reads these
 * rules' `from` paths for the same layers and refuses such calls.
 */
const LAYER_RULES = LAYERS.map((folders, index) => ({
  name: `layer-${folders.join('-')}`,
  severity: 'error',
  comment:
    `src/${folders.join(', src/')} may import only the capabilities of the layers below (LAYERS in ` +
    '.dependency-cruiser.cjs, which says why each sits where it does). An import sideways or up ' +
    'turns the layering into a web: move the shared part down, or pass it in as a parameter.',
  from: { path: `^src/(${folders.join('|')})/` },
  to: {
    path: `^src/(${LAYERS.slice(index).flat().join('|')})/`,
    pathNot: '^src/$1/'
  }
}))

const oneOf = (names) => `(${names.join('|')})`

const UNKNOWN_SRC_FOLDER = `^src/(?!${oneOf(CAPABILITY_FOLDERS)}/)[^/]+/`
const KNOWN_FOLDERS_COMMENT =
  'Every folder directly under src/ is a capability listed in CAPABILITY_FOLDERS in ' +
  '.dependency-cruiser.cjs. Grab-bag folders such as src/lib/, src/repositories/, ' +
  'src/utils/ or src/shared/ are not allowed: put the module in the capability it ' +
  'serves, or add a new capability folder to the list.'

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    // 1. Cycles, type-only imports included (options.tsPreCompilationDeps).
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'Modules must not import each other in a circle, not even through type-only ' +
        'imports: a cycle ties the modules into one unit that cannot be loaded, read or ' +
        'tested on its own. Move the shared part into the lower module, or into a new ' +
        'module both can import.',
      from: {},
      to: { circular: true }
    },

    // 2. Storage is the bottom layer.
    {
      name: 'db-imports-no-capability',
      severity: 'error',
      comment:
        'src/db/ is the storage layer every capability builds on. It may import ' +
        'src/config.ts and src/errors.ts, but nothing from another src/ folder, ' +
        'src/app.ts or src/server.ts; otherwise the layering turns upside down.',
      from: { path: '^src/db/' },
      to: {
        path: '^src/',
        pathNot: ['^src/db/', '^src/(config|errors)[.]ts$']
      }
    },

    // 3. Wire schemas describe data; they do not reach into behaviour.
    {
      name: 'schemas-import-only-schemas',
      severity: 'error',
      comment:
        'src/schemas/ holds the TypeBox wire schemas. They may import other schemas ' +
        'and the enum value lists in src/db/schema.ts, nothing else from the project: ' +
        'capabilities, routes and plugins import the schemas, not the other way round. ' +
        'Constants a schema needs (limits, defaults) belong in src/schemas/.',
      from: { path: '^src/schemas/' },
      to: {
        path: '^(src|plugins|routes)/',
        pathNot: ['^src/schemas/', '^src/db/schema[.]ts$']
      }
    },

    // 4. The Fastify wiring sits on top of src/.
    {
      name: 'src-not-to-plugins-or-routes',
      severity: 'error',
      comment:
        'plugins/ and routes/ are the Fastify wiring on top of src/. Only src/app.ts ' +
        '(which registers them) and src/server.ts may import them; capabilities must ' +
        'stay usable without a running server.',
      from: {
        path: '^src/',
        pathNot: '^src/(app|server)[.]ts$'
      },
      to: { path: '^(plugins|routes)/' }
    },

    // 5.
    {
      name: 'plugins-not-to-routes',
      severity: 'error',
      comment:
        'plugins/ decorate and configure the Fastify instance for every route; a plugin ' +
        'that imports a route module couples all routes to that one. Move what both ' +
        'need into src/.',
      from: { path: '^plugins/' },
      to: { path: '^routes/' }
    },

    // 6.
    {
      name: 'production-not-to-test-bench-scripts',
      severity: 'error',
      comment:
        'Code that ships (src/, plugins/, routes/) must not import from test/, bench/ ' +
        'or scripts/: those folders are not built or deployed. Move the shared part ' +
        'into src/ and import it from both sides.',
      from: { path: '^(src|plugins|routes)/' },
      to: { path: '^(test|bench|scripts)/' }
    },

    // 7. One folder per capability: no grab-bag folders under src/.
    //    Three rules, because a module can be reached three ways: it imports
    //    something, something imports it, or it stands alone.
    {
      name: 'src-folder-is-a-capability',
      severity: 'error',
      comment: KNOWN_FOLDERS_COMMENT,
      from: { path: UNKNOWN_SRC_FOLDER },
      to: {}
    },
    {
      name: 'not-to-unknown-src-folder',
      severity: 'error',
      comment: KNOWN_FOLDERS_COMMENT,
      from: {},
      to: { path: UNKNOWN_SRC_FOLDER }
    },
    {
      name: 'no-module-in-unknown-src-folder',
      severity: 'error',
      comment: KNOWN_FOLDERS_COMMENT,
      from: { orphan: true, path: UNKNOWN_SRC_FOLDER },
      to: {}
    },

    // 8. Capabilities depend one way, layer by layer (LAYERS above).
    ...LAYER_RULES,

    // 9. Routes handle requests through the capabilities; tools stand apart from the tests.
    {
      name: 'routes-not-to-db',
      severity: 'error',
      comment:
        'A route calls one function of its capability and sends what it gets back. The database is ' +
        'the capabilities\' business: a route that imports src/db/ reaches past them.',
      from: { path: '^routes/' },
      to: { path: '^src/db/' }
    },
    {
      name: 'capabilities-not-to-fastify',
      severity: 'error',
      comment:
        'The capabilities a request goes down through (storage, pages, the entities, the change feed and ' +
        'its live delivery, idempotency, users) know nothing of Fastify: the route owns the reply, and hands ' +
        'down what a capability needs of it (a response to write, a request\'s values). So each can be ' +
        'called and tested without a server, and nothing below a route sends an answer.',
      from: { path: '^src/(db|pages|search|idempotency|users|movies|messages|changes|memory|schemas|upstream)/' },
      to: { path: '^node_modules/fastify/' }
    },
    {
      name: 'tools-not-to-test',
      severity: 'error',
      comment:
        'bench/ and scripts/ are tools a user runs; test/ is the suite. What both need (throwaway ' +
        'PostgreSQL clusters, the seed) lives with the tools, and the tests import it from there.',
      from: { path: '^(bench|scripts)/' },
      to: { path: '^test/' }
    },

    // 10. Safety rules.
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment:
        'This import does not resolve to a file on disk or to an installed package. ' +
        'Fix the path (a .js specifier must name a .ts file that exists) or add the ' +
        'package to package.json.',
      from: {},
      to: { couldNotResolve: true }
    },
    {
      name: 'not-to-dev-dep',
      severity: 'error',
      comment:
        'Code that ships (src/, plugins/, routes/) must not import a package from ' +
        'devDependencies: the image drops them (npm prune --omit=dev in the ' +
        'Dockerfile). Move the package to dependencies, or move the import out of ' +
        'shipped code. Type-only ' +
        'imports are fine: they are erased when compiling.',
      from: { path: '^(src|plugins|routes)/' },
      to: {
        dependencyTypes: ['npm-dev'],
        dependencyTypesNot: ['type-only'],
        pathNot: 'node_modules/@types/'
      }
    },
    {
      name: 'no-non-package-json',
      severity: 'error',
      comment:
        'This module imports a package that is not declared in package.json; it only ' +
        'works while some other package happens to install it. Declare it in ' +
        'dependencies (or devDependencies for test, bench and scripts code).',
      from: {},
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'] }
    }
  ],

  options: {
    // Cruise the project's own modules; note packages without reading them.
    doNotFollow: { path: ['node_modules'] },

    // bench/platformatic is a separate package with its own dependencies.
    exclude: { path: ['^bench/platformatic/'] },

    moduleSystems: ['es6', 'cjs'],

    // Keep dependencies that vanish when compiling (import type, export type,
    // type-only specifiers): a cycle through types is still a cycle.
    tsPreCompilationDeps: true,

    // Resolution as tsc does it, e.g. './reader.js' -> './reader.ts'.
    tsConfig: { fileName: 'tsconfig.json' },

    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.d.ts', '.json'],
      mainFields: ['module', 'main', 'types', 'typings']
    },

    // Only compute what the rules above need.
    skipAnalysisNotInRules: true
  }
}
