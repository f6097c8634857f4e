-- Several products' places in one ranking. KEYS: version pointer (unused for hourly).
-- ARGV: the ranking's key (hourly) or version key prefix, the mode (`hourly`, `current` or a
-- version number), then the members. Returns {version or false, cardinality, then per
-- member: rank or false, score or false, entries with a greater score or false}.
local k, v
if ARGV[2] == 'hourly' then
  k, v = ARGV[1], false
elseif ARGV[2] == 'current' then
  v = redis.call('GET', KEYS[1])
  if not v then return {false, 0} end
  k = ARGV[1] .. v
else
  v = ARGV[2]
  k = ARGV[1] .. v
  if redis.call('EXISTS', k) == 0 and redis.call('GET', KEYS[1]) ~= v then return {false, 0} end
end
local out = {v, redis.call('ZCARD', k)}
for i = 3, #ARGV do
  local r = redis.call('ZREVRANK', k, ARGV[i])
  if r then
    local s = redis.call('ZSCORE', k, ARGV[i])
    table.insert(out, r)
    table.insert(out, s)
    table.insert(out, redis.call('ZCOUNT', k, '(' .. s, '+inf'))
  else
    table.insert(out, false)
    table.insert(out, false)
    table.insert(out, false)
  end
end
return out
