-- The cold rows of the benchmark (bench/rows/cold.ts) as a wrk script: every request another random
-- page in one of the four cold sorts, a page before offset 1,000 by subject descending at a random
-- limit, a search for a rare phrase, or a search for a common word in one of four sorts. Shed answers
-- (503 with Retry-After, the service's admission control) are counted apart from failures.
--
--   wrk -t2 -c50 -d30s --timeout 15s -s bench/wrk/random-page.lua http://127.0.0.1:3001 -- messages=1000000
--
-- Arguments after `--`, each name=value:
--   messages=<n>   the messages the deployment holds (GET /v2/messages?limit=1, pagination.total); the
--                  random pages are drawn from its pages of 25 (default 100000, what `npm run seed` makes)
--   seed=<n>       the random seed; each thread adds its number to it (default 18, the cold rows' seed)
--   max=<n>        each thread stops after n answers (default: none, only wrk's --duration)
--   forwarded=1    each request carries X-Forwarded-For of another 10.x.y.z client, as the cold rows do
--                  for a service that trusts the load generator as its proxy (TRUST_PROXY)
-- See docs/performance.md, "Benchmarking your own deployment".

local LIMIT = 25

-- The cold rows' sorts (COLD_SORTS) and the common words' sorts (COMMON_SORTS).
local COLD_SORTS = { '', '&sort=createdAt&order=desc', '&sort=subject', '&sort=priority&order=desc' }
local COMMON_SORTS = { '', '&sort=createdAt&order=desc', '&sort=subject', '&sort=priority' }

-- The words the seed writes (scripts/seed.ts): rare phrases are an adjective with a noun, or two nouns
-- ("badge for the kitchen"); the common words are in 5 to 10 % of messages each (COMMON_WORDS).
local ADJECTIVES = { 'new', 'updated', 'final', 'urgent', 'quarterly', 'shared', 'broken', 'slow', 'quick', 'revised',
  'important', 'internal', 'pending', 'weekly', 'monthly', 'large', 'small', 'old', 'temporary', 'public' }
local NOUNS = { 'report', 'meeting', 'deadline', 'server', 'customer', 'invoice', 'draft', 'ticket', 'release', 'budget',
  'schedule', 'dashboard', 'proposal', 'backup', 'contract', 'feature', 'team', 'query', 'build', 'review', 'document',
  'cluster', 'roadmap', 'survey', 'workshop', 'pipeline', 'printer', 'kitchen', 'badge', 'laptop' }
local COMMON_WORDS = { 'tested', 'cancelled', 'postponed', 'moved', 'reviewed', 'merged', 'scheduled', 'approved', 'fixed',
  'archived', 'booked', 'deployed', 'restarted', 'checked', 'signed', 'badge', 'kitchen' }

local KINDS = { 'page-id', 'page-created-desc', 'page-subject', 'page-priority-desc', 'near-subject-desc', 'rare-phrase', 'common-word' }

local threads = {}
local next_id = 0

function setup (thread)
  next_id = next_id + 1
  thread:set('id', next_id)
  table.insert(threads, thread)
end

local pages = 1
local max_answers = nil
local forwarded = false
-- Per thread, read by done() through thread:get.
answers = 0
ok = 0
shed = 0
failed = 0
sent = {}

local function pick (items)
  return items[math.random(#items)]
end

local function rare_phrase ()
  local n = math.random(#ADJECTIVES * #NOUNS + #NOUNS * (#NOUNS - 1))
  if n <= #ADJECTIVES * #NOUNS then
    return ADJECTIVES[math.floor((n - 1) / #NOUNS) + 1] .. ' ' .. NOUNS[(n - 1) % #NOUNS + 1]
  end
  n = n - #ADJECTIVES * #NOUNS - 1
  local first = math.floor(n / (#NOUNS - 1)) + 1
  local second = n % (#NOUNS - 1) + 1
  if second >= first then second = second + 1 end
  return NOUNS[first] .. ' for the ' .. NOUNS[second]
end

local function encode (text)
  return (text:gsub('[^%w%-_.~]', function (c) return string.format('%%%02X', string.byte(c)) end))
end

function init (args)
  local options = { messages = '100000', seed = '18' }
  for _, arg in ipairs(args) do
    local name, value = arg:match('^(%w+)=(.*)$')
    if name == nil then error('random-page.lua: arguments are name=value, got ' .. arg) end
    options[name] = value
  end
  local messages = tonumber(options.messages)
  if messages == nil or messages < 0 then error('random-page.lua: messages must be a number') end
  pages = math.max(1, math.ceil(messages / LIMIT))
  max_answers = tonumber(options.max)
  forwarded = options.forwarded == '1'
  math.randomseed(tonumber(options.seed) + (id or 0))
  for _, kind in ipairs(KINDS) do sent[kind] = 0 end
end

-- One request of the mix, each kind as likely as another, as each cold row is one row of the table.
local function next_path ()
  local k = math.random(#KINDS)
  local kind = KINDS[k]
  sent[kind] = sent[kind] + 1
  if k <= #COLD_SORTS then
    return '/v2/messages?page=' .. math.random(pages) .. '&limit=' .. LIMIT .. COLD_SORTS[k]
  elseif kind == 'near-subject-desc' then
    local limit = math.random(100)
    return '/v2/messages?page=' .. math.random(math.ceil(1000 / limit)) .. '&limit=' .. limit .. '&sort=subject&order=desc'
  elseif kind == 'rare-phrase' then
    return '/v2/messages/search?q=' .. encode(rare_phrase()) .. '&page=1&limit=' .. LIMIT
  end
  return '/v2/messages/search?q=' .. pick(COMMON_WORDS) .. '&page=1&limit=' .. LIMIT .. pick(COMMON_SORTS)
end

function request ()
  local headers = nil
  if forwarded then
    headers = { ['X-Forwarded-For'] = '10.' .. math.random(0, 255) .. '.' .. math.random(0, 255) .. '.' .. math.random(0, 255) }
  end
  return wrk.format('GET', next_path(), headers)
end

function response (status, headers)
  answers = answers + 1
  if status >= 200 and status < 300 then
    ok = ok + 1
  elseif status == 503 and (headers['Retry-After'] ~= nil or headers['retry-after'] ~= nil) then
    shed = shed + 1
  else
    failed = failed + 1
  end
  if max_answers ~= nil and answers >= max_answers then wrk.thread:stop() end
end

function done (summary, latency)
  local totals = { answers = 0, ok = 0, shed = 0, failed = 0 }
  local kinds = {}
  for _, thread in ipairs(threads) do
    for name in pairs(totals) do totals[name] = totals[name] + thread:get(name) end
    local counts = thread:get('sent')
    for _, kind in ipairs(KINDS) do kinds[kind] = (kinds[kind] or 0) + (counts[kind] or 0) end
  end
  local parts = {}
  for _, kind in ipairs(KINDS) do table.insert(parts, kind .. '=' .. kinds[kind]) end
  io.write(string.format('random-page: answers=%d ok=%d shed=%d failed=%d errors=%d p50_ms=%.2f p99_ms=%.2f\n',
    totals.answers, totals.ok, totals.shed, totals.failed,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
  io.write('random-page: sent ' .. table.concat(parts, ' ') .. '\n')
end
