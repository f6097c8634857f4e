-- The current version of a ranking and a byte range of its packed copy. KEYS: version
-- pointer. ARGV: version key prefix, first byte, last byte. Returns {version or false, bytes,
-- total bytes}.
local p = redis.call('GET', KEYS[1])
if not p then return {false, '', 0} end
local v, refused = pointed(p)
if refused then return refused end
local k = ARGV[1] .. v .. ':packed'
if redis.call('EXISTS', k) == 0 then
  local delta = delta_version(ARGV[1], v)
  if delta then return delta end
end
return {v, redis.call('GETRANGE', k, ARGV[2], ARGV[3]), redis.call('STRLEN', k)}
