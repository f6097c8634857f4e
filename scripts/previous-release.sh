#!/usr/bin/env bash
# The previous release's server, for the rolling-upgrade test: the commit named in
# PREVIOUS_RELEASE (its first word) built once per machine (a debug build) into a cache
# outside any clone, keyed by that commit. Prints the binary's path.
#
#   previous-release.sh            build it unless cached; print its path
#   previous-release.sh <commit>   the same for another commit of this history (an older
#                                  release a test runs beside)
#
# The commit is read from this clone's history (`git archive`), so a clone of main has it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
COMMIT=${1:-$(awk 'NF && $1 !~ /^#/ { print $1; exit }' "$ROOT/PREVIOUS_RELEASE")}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ranking-service/previous-$COMMIT
BIN=$CACHE/ranking-server

fail() {
  echo "previous-release: $*" >&2
  exit 1
}

if [ ! -x "$BIN" ]; then
  git -C "$ROOT" cat-file -e "$COMMIT^{commit}" 2>/dev/null \
    || fail "commit $COMMIT is not in this clone's history"
  rm -rf "$CACHE.tmp" && mkdir -p "$CACHE.tmp/src"
  git -C "$ROOT" archive "$COMMIT" | tar -x -C "$CACHE.tmp/src"
  echo "previous-release: building $COMMIT's server once into $CACHE (a debug build)" >&2
  # Its own target folder: this clone's build stays as it is. The console's assets are not
  # needed: the server embeds whatever is there.
  (cd "$CACHE.tmp/src" && CARGO_TARGET_DIR="$CACHE.tmp/target" cargo build --locked -p ranking-server \
    --bin ranking-server >"$CACHE.tmp/build.log" 2>&1) \
    || fail "the build of $COMMIT failed (see $CACHE.tmp/build.log)"
  cp "$CACHE.tmp/target/debug/ranking-server" "$CACHE.tmp/ranking-server"
  rm -rf "$CACHE.tmp/target" "$CACHE.tmp/src"
  rm -rf "$CACHE" && mv "$CACHE.tmp" "$CACHE"
fi
echo "$BIN"
