-- Publishes a staging key (and its packed copy) as the next version. KEYS: staging,
-- version pointer, superseded index, packed staging, product index staging. ARGV: version
-- key prefix, expire-at (Unix s), superseded life (ms), channel, announcement prefix,
-- whether the version holds entries (1/0), whether it has a ZSET besides its packed copy
-- (1/0; weekly and segment rankings have the packed copy and its product index instead).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = tonumber(redis.call('GET', KEYS[2]) or '0')
local v = math.max(now, old + 1)
local vs = string.format('%.0f', v)
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, g in ipairs(gone) do redis.call('UNLINK', ARGV[1] .. g, ARGV[1] .. g .. ':packed', ARGV[1] .. g .. ':index') end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if old > 0 then
  local os = string.format('%.0f', old)
  local ok = ARGV[1] .. os
  local keep = tonumber(ARGV[3])
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
if ARGV[6] == '1' then
  if ARGV[7] == '1' then
    redis.call('RENAME', KEYS[1], ARGV[1] .. vs)
    redis.call('EXPIREAT', ARGV[1] .. vs, ARGV[2])
  else
    redis.call('RENAME', KEYS[5], ARGV[1] .. vs .. ':index')
    redis.call('EXPIREAT', ARGV[1] .. vs .. ':index', ARGV[2])
  end
  redis.call('RENAME', KEYS[4], ARGV[1] .. vs .. ':packed')
  redis.call('EXPIREAT', ARGV[1] .. vs .. ':packed', ARGV[2])
end
redis.call('SET', KEYS[2], vs, 'EXAT', ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[5] .. ' ' .. vs)
return v
