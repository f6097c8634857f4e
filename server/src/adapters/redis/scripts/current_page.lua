-- The current version and a page of it. KEYS: version pointer. ARGV: version key prefix,
-- start, stop. Returns {version or false, members with scores, cardinality}.
local v = redis.call('GET', KEYS[1])
if not v then return {false, {}, 0} end
local k = ARGV[1] .. v
return {v, redis.call('ZREVRANGE', k, ARGV[2], ARGV[3], 'WITHSCORES'), redis.call('ZCARD', k)}
