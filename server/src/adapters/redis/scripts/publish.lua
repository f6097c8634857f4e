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
-- Layout 2 (`delta.rs`): when `delta_of` names a version, the staged version is the changes
-- after it (`<staged sorted set>:delta`), published only while it is the current version,
-- its chain's base still has its packed copy and the chain holds fewer than `chain_max`
-- deltas; otherwise nothing is written and the error is `REBASE <why>` (the writer publishes
-- the version whole).
-- Layout 3: a delta of a board with pins says so in its pointer (`N:3:<base>`), so that a
-- release reading only layout 2 refuses it (`LAYOUT 3`) rather than read it without its pins.
local delta_of, chain_max, delta_layout = ARGV[14], tonumber(ARGV[15]), ARGV[16]
local parts = {':packed', ':index', ':pins', ':served', ':stats', ':delta'}
local function each_part(base, f) for _, p in ipairs(parts) do f(base .. p) end end
local function unlink(k) redis.call('UNLINK', k) end
-- Every version of the chain that starts at `base` (its deltas, then the base).
local function chain_of(base)
  local members = redis.call('LRANGE', version_prefix .. base .. ':chain', 0, -1)
  table.insert(members, base)
  return members
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A pointer written in a newer layout still orders versions by its number; one of a delta
-- version (`N:<layout>:<base>`, layout 2 or 3) names its chain's base.
local current = redis.call('GET', pointer)
local old = tonumber((pointed(current)) or '0')
local old_base = current and string.match(current, '^%d+:%d+:(%d+)')
local os = string.format('%.0f', old)
local base = nil
if delta_of ~= '' then
  base = old_base or os
  if old == 0 or os ~= delta_of then
    return redis.error_reply('REBASE the current version is ' .. os)
  end
  if redis.call('EXISTS', version_prefix .. base .. ':packed') == 0 then
    return redis.error_reply('REBASE the base ' .. base .. ' is gone')
  end
  if redis.call('LLEN', version_prefix .. base .. ':chain') >= chain_max then
    return redis.error_reply('REBASE the chain of ' .. base .. ' is full')
  end
end
local v = math.max(now, old + 1)
local vs = string.format('%.0f', v)
-- `version_prefix .. g` without a suffix: the sorted set of a version published before the daily
-- ranking's moved to its own key. `<tip>:<base>`: a chain superseded whole.
local gone = redis.call('ZRANGEBYSCORE', superseded, '-inf', now)
for _, g in ipairs(gone) do
  local gone_base = string.match(g, '^%d+:(%d+)$')
  if gone_base then
    for _, m in ipairs(chain_of(gone_base)) do each_part(version_prefix .. m, unlink) end
    unlink(version_prefix .. gone_base .. ':chain')
  else
    unlink(version_prefix .. g)
    each_part(version_prefix .. g, unlink)
  end
end
redis.call('ZREMRANGEBYSCORE', superseded, '-inf', now)
-- A delta leaves the version before it where it is: a member of its chain, which lives as
-- long as the chain is current and is superseded with it.
if old > 0 and not base then
  local ok = version_prefix .. os
  local keep = superseded_life
  local longest = redis.call('ZREVRANGE', superseded, 0, 0, 'WITHSCORES')
  if longest[2] and tonumber(longest[2]) - now + spacing > keep then keep = grace end
  if old_base then
    local members = chain_of(old_base)
    if keep > 0 then
      for _, m in ipairs(members) do each_part(version_prefix .. m, function(k) redis.call('PEXPIRE', k, keep * 2) end) end
      redis.call('PEXPIRE', version_prefix .. old_base .. ':chain', keep * 2)
      redis.call('ZADD', superseded, now + keep, os .. ':' .. old_base)
      redis.call('EXPIREAT', superseded, expire_at)
    else
      for _, m in ipairs(members) do each_part(version_prefix .. m, unlink) end
      unlink(version_prefix .. old_base .. ':chain')
    end
  elseif keep > 0 and redis.call('EXISTS', ok .. ':packed') == 1 then
    redis.call('PEXPIRE', ok, keep * 2)
    each_part(ok, function(k) redis.call('PEXPIRE', k, keep * 2) end)
    redis.call('ZADD', superseded, now + keep, os)
    redis.call('EXPIREAT', superseded, expire_at)
  else
    unlink(ok)
    each_part(ok, unlink)
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
local new = version_prefix .. vs
if base then
  redis.call('RENAME', staged_zset .. ':delta', new .. ':delta')
  redis.call('EXPIREAT', new .. ':delta', expire_at)
  redis.call('RPUSH', version_prefix .. base .. ':chain', vs)
  redis.call('EXPIREAT', version_prefix .. base .. ':chain', expire_at)
elseif has_entries then
  redis.call('RENAME', staged_index, new .. ':index')
  redis.call('EXPIREAT', new .. ':index', expire_at)
  redis.call('RENAME', staged_packed, new .. ':packed')
  redis.call('EXPIREAT', new .. ':packed', expire_at)
end
for suffix, present in pairs({[':pins'] = has_pins, [':served'] = has_served, [':stats'] = has_stats}) do
  if present then
    redis.call('RENAME', staged_zset .. suffix, new .. suffix)
    redis.call('EXPIREAT', new .. suffix, expire_at)
  end
end
if base then
  redis.call('SET', pointer, vs .. ':' .. delta_layout .. ':' .. base, 'EXAT', expire_at)
else
  redis.call('SET', pointer, vs, 'EXAT', expire_at)
end
redis.call('PUBLISH', channel, announced .. ' ' .. vs)
return v
