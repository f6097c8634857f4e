-- A page of one version, if kept. KEYS: version pointer. ARGV: version key prefix,
-- version, start, stop. Returns {kept (1/0), members with scores, cardinality}.
local k = ARGV[1] .. ARGV[2]
if redis.call('EXISTS', k) == 0 and redis.call('GET', KEYS[1]) ~= ARGV[2] then return {0, {}, 0} end
return {1, redis.call('ZREVRANGE', k, ARGV[3], ARGV[4], 'WITHSCORES'), redis.call('ZCARD', k)}
