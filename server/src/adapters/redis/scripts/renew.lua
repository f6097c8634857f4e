-- Extends a lease if this holder still has it. KEYS: the lease. ARGV: the holder's token, its life in ms.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end
