-- Prepended to every script that reads a version pointer. A pointer's value is `N` (version
-- N, stored in layout 1: a whole packed copy and its product index) or `N:L…` (version N,
-- stored in layout L by a release that writes it; what follows is that layout's own). A
-- script of this release serves layout 1 only: a version in another is refused with
-- `LAYOUT <L>`, never read as an empty ranking.
local NEWEST_LAYOUT = 1
-- The version number of a pointer's value (a string), or nil.
local function pointer_version(p)
  if not p then return nil end
  return string.match(p, '^(%d+)')
end
-- The error when a pointer's value names a layout this release does not read, else nil.
local function unreadable(p)
  if not p then return nil end
  local layout = tonumber(string.match(p, '^%d+:(%d+)') or '1')
  if layout > NEWEST_LAYOUT then return redis.error_reply('LAYOUT ' .. layout) end
  return nil
end
