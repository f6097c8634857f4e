#!/usr/bin/env bash
# The web console (console/): its npm packages, its build, its browser tests.
#
# The packages of console/package-lock.json are installed once per machine into a cache
# outside any clone, keyed by the lock's hash, and linked as console/node_modules. The build
# generates the client from proto/, type-checks and bundles with Vite into console/dist,
# which the server embeds when it is compiled; it is skipped while its inputs are unchanged,
# so an unchanged console never makes cargo rebuild the server.
#
#   console.sh build    build console/dist when its inputs changed
#   console.sh test     run the browser tests (console/tests) against target/debug/ranking-server
#   console.sh bench    the console's benchmark (bundle size, time to a drawn board, gRPC-Web cost)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONSOLE=$ROOT/console
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ranking-service
export PATH="$CONSOLE/node_modules/.bin:$PATH"
# A server binary named relative to where the script was called from.
if [ -n "${RANKING_SERVER_BIN:-}" ]; then RANKING_SERVER_BIN=$(realpath "$RANKING_SERVER_BIN"); fi

# shellcheck source=npm-cache.sh
. "$ROOT/scripts/npm-cache.sh"
modules() {
  npm_modules "$CONSOLE" console
}

# A hash of everything the bundle is made from.
inputs() {
  (cd "$ROOT" && find proto/ranking console/src console/index.html console/vite.config.ts \
    console/tsconfig.json console/buf.gen.yaml console/package-lock.json -type f \
    -not -path 'console/src/gen/*' -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-64
}

build() {
  modules
  local stamp=$CONSOLE/.build-stamp hash
  hash=$(inputs)
  if [ -f "$CONSOLE/dist/index.html" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$hash" ]; then
    return
  fi
  cd "$CONSOLE"
  rm -rf src/gen
  buf generate
  tsc -p .
  vite build --logLevel warn
  echo "$hash" > "$stamp"
}

# Named apart from the browser: inside a function called `chromium`, `command -v chromium`
# finds the function itself, and the browser was never installed on a fresh machine.
ensure_chromium() {
  if [ ! -x /usr/bin/chromium ]; then
    echo "console: installing Debian's chromium for the browser tests" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || {
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
    }
  fi
}

# The console built, Chromium at hand, and the shell in console/ with its .build folder, for
# the tests and the benchmark.
prepare() {
  build
  ensure_chromium
  cd "$CONSOLE"
  mkdir -p .build
}

tests() {
  prepare
  tsc -p tests
  esbuild tests/*.test.ts --bundle --platform=node --format=esm --packages=external \
    --outdir=.build --log-level=warning
  RANKING_SERVER_BIN=${RANKING_SERVER_BIN:-$ROOT/target/debug/ranking-server} \
    RANKING_CONSOLE_SHOTS=$ROOT/target/console node --test --test-concurrency=1 .build/*.test.js
}

bench() {
  prepare
  esbuild tests/bench.ts --bundle --platform=node --format=esm --packages=external \
    --outfile=.build/bench.mjs --log-level=warning
  RANKING_SERVER_BIN=${RANKING_SERVER_BIN:-$ROOT/target/release/ranking-server} node .build/bench.mjs
}

case ${1:-build} in
  build) build ;;
  test) tests ;;
  bench) bench ;;
  modules) modules ;;
  *) echo "usage: $0 build|test|bench|modules" >&2; exit 2 ;;
esac
