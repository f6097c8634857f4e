-- Publishes a staged version as the next version. KEYS: staging sorted set, version pointer,
-- superseded index, packed staging, product index staging, the daily ranking's sorted set
-- (SPEC §5). ARGV: version key prefix, expire-at (Unix s), superseded life (ms), channel,
-- announcement prefix, whether the version holds entries (1/0), whether the staged sorted
-- set replaces the daily ranking's (1/0: a daily ranking's full publication; a live pass's
-- and the other rankings have the packed copy and its product index only), the spacing of
-- superseded versions kept for their whole life and the grace of the others (ms; see
-- `VersionLife::superseded_life`).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = tonumber(redis.call('GET', KEYS[2]) or '0')
local v = math.max(now, old + 1)
local vs = string.format('%.0f', v)
-- `ARGV[1] .. g` without a suffix: the sorted set of a version published before the daily
-- ranking's moved to its own key.
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, g in ipairs(gone) do redis.call('UNLINK', ARGV[1] .. g, ARGV[1] .. g .. ':packed', ARGV[1] .. g .. ':index') end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if old > 0 then
  local os = string.format('%.0f', old)
  local ok = ARGV[1] .. os
  local keep = tonumber(ARGV[3])
  local longest = redis.call('ZREVRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if longest[2] and tonumber(longest[2]) - now + tonumber(ARGV[8]) > keep then keep = tonumber(ARGV[9]) end
  if keep > 0 and redis.call('EXISTS', ok .. ':packed') == 1 then
    redis.call('PEXPIRE', ok, keep * 2)
    redis.call('PEXPIRE', ok .. ':packed', keep * 2)
    redis.call('PEXPIRE', ok .. ':index', keep * 2)
    redis.call('ZADD', KEYS[3], now + keep, os)
    redis.call('EXPIREAT', KEYS[3], ARGV[2])
  else
    redis.call('UNLINK', ok, ok .. ':packed', ok .. ':index')
  end
end
if ARGV[7] == '1' then
  -- UNLINK first: RENAME over a big key would free it inside the script.
  redis.call('UNLINK', KEYS[6])
  if ARGV[6] == '1' then
    redis.call('RENAME', KEYS[1], KEYS[6])
    redis.call('EXPIREAT', KEYS[6], ARGV[2])
  end
end
if ARGV[6] == '1' then
  redis.call('RENAME', KEYS[5], ARGV[1] .. vs .. ':index')
  redis.call('EXPIREAT', ARGV[1] .. vs .. ':index', ARGV[2])
  redis.call('RENAME', KEYS[4], ARGV[1] .. vs .. ':packed')
  redis.call('EXPIREAT', ARGV[1] .. vs .. ':packed', ARGV[2])
end
redis.call('SET', KEYS[2], vs, 'EXAT', ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[5] .. ' ' .. vs)
return v
