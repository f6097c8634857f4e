-- Moves a board's feed cursor forward: only to a later version than the one it holds.
-- KEYS: the cursor (a hash: version, whole_at, top). ARGV: version, whole_at (Unix ms),
-- top (packed), expiry (Unix ms). Returns 1 when moved, 0 when the cursor was there or later.
local held = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if held >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'whole_at', ARGV[2], 'top', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
return 1
