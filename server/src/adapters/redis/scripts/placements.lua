-- Several products' places in an hourly ranking. KEYS: the ranking. ARGV: the members.
-- Returns {false (no version), cardinality, then per member: rank or false, score or false,
-- entries with a greater score or false}.
local k = KEYS[1]
local out = {false, redis.call('ZCARD', k)}
for i = 1, #ARGV do
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
