-- Deletes a lease if this holder still has it. KEYS: the lease. ARGV: the holder's token.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end
