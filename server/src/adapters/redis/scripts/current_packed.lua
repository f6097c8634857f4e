-- The current version of a ranking and a byte range of its packed copy. KEYS: version
-- pointer. ARGV: version key prefix, first byte, last byte. Returns {version or false, bytes,
-- total bytes}.
local v = redis.call('GET', KEYS[1])
if not v then return {false, '', 0} end
local k = ARGV[1] .. v .. ':packed'
return {v, redis.call('GETRANGE', k, ARGV[2], ARGV[3]), redis.call('STRLEN', k)}
