-- Packed entries of one version, if kept. KEYS: version pointer. ARGV: version key prefix,
-- version, first byte, last byte. Returns {kept (1/0), bytes, total bytes}.
local k = ARGV[1] .. ARGV[2] .. ':packed'
if redis.call('EXISTS', k) == 1 then
  return {1, redis.call('GETRANGE', k, ARGV[3], ARGV[4]), redis.call('STRLEN', k)}
end
local delta = delta_version(ARGV[1], ARGV[2])
if delta then return delta end
local current, refused = pointed(redis.call('GET', KEYS[1]))
if current == ARGV[2] then
  if refused then return refused end
  return {1, '', 0}
end
return {0, '', 0}
