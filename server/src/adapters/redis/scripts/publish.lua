-- Publishes a staged version as the next version of a ranking; returns its number. Called
-- through `scripts::Publication`, which names every key and argument below. Fenced: when a
-- lease token is given and the lease key does not hold it (the writer's lease expired, or
-- another holder has it), nothing is written and the error is `FENCED <ms the lease key has
-- left, or -2>`.
local staged_zset, pointer, superseded, staged_packed, staged_index, daily_zset, lease =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local token = ARGV[10]
if token ~= '' and redis.call('GET', lease) ~= token then
  return redis.error_reply('FENCED ' .. redis.call('PTTL', lease))
end
local version_prefix, expire_at, superseded_life, channel, announced =
  ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
-- has_entries: an empty ranking has nothing staged. replaces_sorted_set: a daily ranking's
-- full publication (a live pass's, and every other ranking's, is the packed copy and its
-- product index only). spacing and grace: see `VersionLife::superseded_life`.
local has_entries, replaces_sorted_set, spacing, grace =
  ARGV[6] == '1', ARGV[7] == '1', tonumber(ARGV[8]), tonumber(ARGV[9])
-- A served board's parts, staged beside the staged sorted set: its pins' positions and its
-- parts whole (see `served.rs`); the version's statistics (`stats.rs`).
local has_pins, has_served, has_stats = ARGV[11] == '1', ARGV[12] == '1', ARGV[13] == '1'
local parts = {':packed', ':index', ':pins', ':served', ':stats'}
local function each_part(base, f) for _, p in ipairs(parts) do f(base .. p) end end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A pointer written in a newer layout still orders versions by its number.
local old = tonumber((pointed(redis.call('GET', pointer))) or '0')
local v = math.max(now, old + 1)
local vs = string.format('%.0f', v)
-- `version_prefix .. g` without a suffix: the sorted set of a version published before the daily
-- ranking's moved to its own key.
local gone = redis.call('ZRANGEBYSCORE', superseded, '-inf', now)
for _, g in ipairs(gone) do
  redis.call('UNLINK', version_prefix .. g)
  each_part(version_prefix .. g, function(k) redis.call('UNLINK', k) end)
end
redis.call('ZREMRANGEBYSCORE', superseded, '-inf', now)
if old > 0 then
  local os = string.format('%.0f', old)
  local ok = version_prefix .. os
  local keep = superseded_life
  local longest = redis.call('ZREVRANGE', superseded, 0, 0, 'WITHSCORES')
  if longest[2] and tonumber(longest[2]) - now + spacing > keep then keep = grace end
  if keep > 0 and redis.call('EXISTS', ok .. ':packed') == 1 then
    redis.call('PEXPIRE', ok, keep * 2)
    each_part(ok, function(k) redis.call('PEXPIRE', k, keep * 2) end)
    redis.call('ZADD', superseded, now + keep, os)
    redis.call('EXPIREAT', superseded, expire_at)
  else
    redis.call('UNLINK', ok)
    each_part(ok, function(k) redis.call('UNLINK', k) end)
  end
end
if replaces_sorted_set then
  -- UNLINK first: RENAME over a big key would free it inside the script.
  redis.call('UNLINK', daily_zset)
  if has_entries then
    redis.call('RENAME', staged_zset, daily_zset)
    redis.call('EXPIREAT', daily_zset, expire_at)
  end
end
if has_entries then
  redis.call('RENAME', staged_index, version_prefix .. vs .. ':index')
  redis.call('EXPIREAT', version_prefix .. vs .. ':index', expire_at)
  redis.call('RENAME', staged_packed, version_prefix .. vs .. ':packed')
  redis.call('EXPIREAT', version_prefix .. vs .. ':packed', expire_at)
end
for suffix, present in pairs({[':pins'] = has_pins, [':served'] = has_served, [':stats'] = has_stats}) do
  if present then
    redis.call('RENAME', staged_zset .. suffix, version_prefix .. vs .. suffix)
    redis.call('EXPIREAT', version_prefix .. vs .. suffix, expire_at)
  end
end
redis.call('SET', pointer, vs, 'EXAT', expire_at)
redis.call('PUBLISH', channel, announced .. ' ' .. vs)
return v
