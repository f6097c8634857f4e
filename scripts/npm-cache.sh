# Sourced by scripts/console.sh and scripts/clients.sh: an npm project's packages installed
# once per machine into a cache outside any clone, keyed by its lock's hash, and linked as
# its node_modules.
#
#   npm_modules <project folder> <cache name>
npm_modules() {
  local project=$1 name=$2 cache key dir tmp
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/ranking-service
  key=$(sha256sum "$project/package-lock.json" | cut -c1-16)
  dir=$cache/$name-$key
  if [ ! -d "$dir/node_modules" ]; then
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/$name-install.XXXXXX")
    cp "$project/package.json" "$project/package-lock.json" "$tmp/"
    (cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error >&2)
    mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp" # another run got there first
  fi
  if [ "$(readlink "$project/node_modules" 2>/dev/null)" != "$dir/node_modules" ]; then
    rm -rf "$project/node_modules"
    ln -s "$dir/node_modules" "$project/node_modules"
  fi
}
