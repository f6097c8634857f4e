-- Prepended to every script that reads a version pointer, after the layouts this release
-- reads (`OLDEST_LAYOUT`, `NEWEST_LAYOUT`, from `ports::READS`). A pointer's value is `N`
-- (version N, stored in layout 1: a whole packed copy and its product index) or `N:L…`
-- (version N, stored in layout L by a release that writes it; what follows is that layout's
-- own). A version in a layout this release does not read is refused with `LAYOUT <L>`, never
-- read as an empty ranking.
--
-- A pointer's value (a string, or nil) read: its version number (a string, or nil), and the
-- refusal to return when its layout is not one this release reads (else nil).
local function pointed(p)
  if not p then return nil, nil end
  local layout = tonumber(string.match(p, '^%d+:(%d+)') or '1')
  local refused = nil
  if layout < OLDEST_LAYOUT or layout > NEWEST_LAYOUT then
    refused = redis.error_reply('LAYOUT ' .. layout)
  end
  return string.match(p, '^(%d+)'), refused
end

-- Version `v` (a string) of the ranking whose version keys start with `prefix`, when it has no
-- packed copy: the refusal to return when it is a delta version (layout 2: `DELTA <v>`, read
-- whole by the caller from its chain), else nil.
local function delta_version(prefix, v)
  if redis.call('EXISTS', prefix .. v .. ':delta') == 1 then
    return redis.error_reply('DELTA ' .. v)
  end
  return nil
end
