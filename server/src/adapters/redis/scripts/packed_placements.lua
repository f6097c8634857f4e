-- Several products' places in a version of a ranking (entries of 16 bytes in ranking order:
-- product id and score bits, big-endian). KEYS: version pointer. ARGV: version key prefix,
-- `current` or a version number, then each product id as its 8 bytes. Returns {version or
-- false, entries, then per product: index or false, score bits or false, entries with a
-- greater score or false}.
--
-- A product is found by a binary search of the version's product index (4 bytes an entry:
-- the positions of the packed entries in ascending product id; ids compared as a signed high
-- and an unsigned low half, so that Lua's doubles stay exact and no locale orders bytes),
-- the entries above it by a binary search of the scores, which descend: a few dozen
-- `GETRANGE`s of a few bytes per product, whatever the ranking's size. A version published
-- before product indexes existed is searched byte by byte (aligned to an entry) instead.
--
-- A served board (merchandising controls) may have pins (`v<N>:pins`, 4 bytes a position,
-- ascending): a pinned entry's place is not its score's, so its tied rank is its own, and the
-- others' is the first entry of their score among the unpinned ones, which descend: the
-- binary search runs over those (the n-th unpinned entry is found past the pins before it).
local v
if ARGV[2] == 'current' then
  local p = redis.call('GET', KEYS[1])
  if not p then return {false, 0} end
  local refused
  v, refused = pointed(p)
  if refused then return refused end
  if redis.call('EXISTS', ARGV[1] .. v .. ':packed') == 0 then
    local delta = delta_version(ARGV[1], v)
    if delta then return delta end
  end
else
  v = ARGV[2]
  if redis.call('EXISTS', ARGV[1] .. v .. ':packed') == 0 then
    local delta = delta_version(ARGV[1], v)
    if delta then return delta end
    local current, refused = pointed(redis.call('GET', KEYS[1]))
    if current ~= v then return {false, 0} end
    if refused then return refused end
  end
end
local pk, ik = ARGV[1] .. v .. ':packed', ARGV[1] .. v .. ':index'
local n = redis.call('STRLEN', pk) / 16
local out = {v, n}
local data = nil
if n > 0 and redis.call('EXISTS', ik) == 0 then data = redis.call('GET', pk) end
local function entry(i)
  if data then return string.sub(data, i * 16 + 1, i * 16 + 16) end
  return redis.call('GETRANGE', pk, i * 16, i * 16 + 15)
end
local function score(i) return (struct.unpack('>d', entry(i), 9)) end
local pins = {}
local pins_raw = redis.call('GET', ARGV[1] .. v .. ':pins')
if pins_raw then
  for k = 0, #pins_raw / 4 - 1 do pins[k + 1] = (struct.unpack('>I4', pins_raw, k * 4 + 1)) end
end
-- Pins before position i, and whether i is one.
local function pins_before(i)
  local lo, hi = 1, #pins + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if pins[mid] < i then lo = mid + 1 else hi = mid end
  end
  return lo - 1, pins[lo] == i
end
-- The position of the n-th (0-based) unpinned entry.
local function unpinned(n)
  local at = n
  for k = 1, #pins do
    if pins[k] <= at then at = at + 1 else break end
  end
  return at
end
local function halves(bytes, at) return struct.unpack('>i4', bytes, at), (struct.unpack('>I4', bytes, at + 4)) end
local function position(id)
  if data then
    local at = 1
    while true do
      local s = string.find(data, id, at, true)
      if not s then return nil end
      if (s - 1) % 16 == 0 then return (s - 1) / 16 end
      at = s + 1
    end
  end
  local hi_id, lo_id = halves(id, 1)
  local lo, hi = 0, n - 1
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local at = struct.unpack('>I4', redis.call('GETRANGE', ik, mid * 4, mid * 4 + 3))
    local h, l = halves(entry(at), 1)
    if h == hi_id and l == lo_id then return at end
    if h < hi_id or (h == hi_id and l < lo_id) then lo = mid + 1 else hi = mid - 1 end
  end
  return nil
end
for a = 3, #ARGV do
  local i = position(ARGV[a])
  if i then
    local e = entry(i)
    local mine = (struct.unpack('>d', e, 9))
    local before, pinned = pins_before(i)
    local head = i
    if not pinned then
      local lo, hi = 0, i - before
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        if score(unpinned(mid)) > mine then lo = mid + 1 else hi = mid end
      end
      head = unpinned(lo)
    end
    table.insert(out, i)
    table.insert(out, string.sub(e, 9, 16))
    table.insert(out, head)
  else
    table.insert(out, false)
    table.insert(out, false)
    table.insert(out, false)
  end
end
return out
