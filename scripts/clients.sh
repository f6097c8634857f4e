#!/usr/bin/env bash
# The clients of clients/ (Go, Python, TypeScript, Java/Kotlin with Spring): generated from
# proto/ by each ecosystem's own tools, built, and tested against the server.
#
# Every toolchain package is fetched once per machine into a cache outside any clone
# (~/.cache/ranking-service, Go's module cache, Maven's ~/.m2), so a warm run downloads
# nothing: the Node packages keyed by clients/node/package-lock.json (as the console's), the
# Python packages in a virtualenv keyed by clients/python/requirements.txt, Go's protoc
# plugins installed into a folder named by their versions.
#
#   clients.sh build [lang...]   generate and build (all four when none is named)
#   clients.sh test [lang...]    build, then run each client's tests against RANKING_SERVER_BIN
#                                (default target/debug/ranking-server)
#   clients.sh check-go          fail when clients/go's committed generated code is stale
#
# lang: go, python, node, java.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLIENTS=$ROOT/clients
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ranking-service
# A server binary named relative to where the script was called from.
if [ -n "${RANKING_SERVER_BIN:-}" ]; then RANKING_SERVER_BIN=$(realpath "$RANKING_SERVER_BIN"); fi
export RANKING_SERVER_BIN=${RANKING_SERVER_BIN:-$ROOT/target/debug/ranking-server}

# The versions of the generators, where the ecosystem does not pin them in a lock file.
PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=v1.6.0

# clients/node's packages (buf included, which generates for Go too), installed once per
# machine keyed by the lock's hash and linked as clients/node/node_modules.
# shellcheck source=npm-cache.sh
. "$ROOT/scripts/npm-cache.sh"
node_modules() {
  npm_modules "$CLIENTS/node" node-client
}

BUF=$CLIENTS/node/node_modules/.bin/buf

# Go's protoc plugins, built once per machine by `go install` into a folder of their versions.
go_plugins() {
  GO_PLUGINS=$CACHE/go-plugins-$PROTOC_GEN_GO-$PROTOC_GEN_GO_GRPC
  if [ ! -x "$GO_PLUGINS/protoc-gen-go-grpc" ]; then
    GOBIN=$GO_PLUGINS go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO"
    GOBIN=$GO_PLUGINS go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"
  fi
}

# Generates clients/go's stubs into $1 (the module's folder or a copy of it).
go_generate() {
  node_modules
  go_plugins
  (cd "$1" && PATH=$GO_PLUGINS:$PATH "$BUF" generate)
}

check_go() {
  local tmp status=0
  tmp=$(mktemp -d)
  # buf.gen.yaml names ../../proto: the copy sits two levels below a link to it.
  mkdir -p "$tmp/a/b"
  cp "$CLIENTS/go/buf.gen.yaml" "$tmp/a/b/"
  ln -s "$ROOT/proto" "$tmp/proto"
  go_generate "$tmp/a/b"
  if ! diff -r "$CLIENTS/go/rankingv1" "$tmp/a/b/rankingv1" >/dev/null; then
    echo "clients/go/rankingv1 is stale: regenerate it (cd clients/go && buf generate) and commit it" >&2
    diff -r "$CLIENTS/go/rankingv1" "$tmp/a/b/rankingv1" | head -20 >&2
    status=1
  fi
  rm -rf "$tmp"
  return $status
}

go_build() {
  check_go
  local unformatted
  unformatted=$(cd "$CLIENTS/go" && gofmt -l .)
  [ -z "$unformatted" ] || { echo "clients/go: gofmt would change $unformatted" >&2; return 1; }
  (cd "$CLIENTS/go" && go vet ./... && go build ./...)
}

go_test() {
  go_build
  (cd "$CLIENTS/go" && go test -count=1 ./...)
}

# A virtualenv with clients/python/requirements.txt, once per machine.
python_env() {
  local key
  key=$(sha256sum "$CLIENTS/python/requirements.txt" | cut -c1-16)
  PYTHON_ENV=$CACHE/python-client-$key
  if [ ! -x "$PYTHON_ENV/bin/pytest" ]; then
    rm -rf "$PYTHON_ENV.tmp"
    python3 -m venv "$PYTHON_ENV.tmp"
    "$PYTHON_ENV.tmp/bin/pip" install --quiet --disable-pip-version-check -r "$CLIENTS/python/requirements.txt"
    # A virtualenv names its own path inside; it is made under its final name.
    rm -rf "$PYTHON_ENV.tmp"
    python3 -m venv "$PYTHON_ENV"
    "$PYTHON_ENV/bin/pip" install --quiet --disable-pip-version-check -r "$CLIENTS/python/requirements.txt"
  fi
}

python_build() {
  python_env
  local src=$CLIENTS/python/src
  rm -rf "$src/ranking"
  (cd "$CLIENTS/python" && PATH=$PYTHON_ENV/bin:$PATH "$PYTHON_ENV/bin/python" -m grpc_tools.protoc \
    -I "$ROOT/proto" --python_out=src --grpc_python_out=src --mypy_out=quiet:src --mypy_grpc_out=quiet:src \
    "$ROOT/proto/ranking/v1/ranking.proto")
  for d in "$src/ranking" "$src/ranking/v1"; do touch "$d/__init__.py" "$d/py.typed"; done
}

python_test() {
  python_build
  (cd "$CLIENTS/python" && PYTHONPATH=src "$PYTHON_ENV/bin/python" -m pytest -q -p no:cacheprovider)
}

node_build() {
  node_modules
  (cd "$CLIENTS/node" && rm -rf src/gen dist && export PATH=$CLIENTS/node/node_modules/.bin:$PATH && buf generate && tsc -p .)
}

node_test() {
  node_build
  (cd "$CLIENTS/node" && node --test --test-concurrency=1 dist/test/*.test.js)
}

# Maven 3.9 (the protobuf plugin needs it) through the wrapper, downloaded once per machine
# into ~/.m2/wrapper; the stubs are generated into each module's target/ at build time.
java_build() {
  (cd "$CLIENTS/java" && ./mvnw -B -q -ntp -DskipTests verify)
}

java_test() {
  (cd "$CLIENTS/java" && ./mvnw -B -q -ntp verify)
}

each() {
  local verb=$1
  shift
  local langs=("$@")
  [ ${#langs[@]} -gt 0 ] || langs=(go python node java)
  for lang in "${langs[@]}"; do
    case $lang in
      go | python | node | java) ;;
      *) echo "unknown client: $lang (go, python, node, java)" >&2; exit 2 ;;
    esac
    echo "clients: $verb $lang" >&2
    "${lang}_$verb"
  done
}

case ${1:-build} in
  build) shift || true; each build "$@" ;;
  test)
    shift
    [ -x "$RANKING_SERVER_BIN" ] || { echo "no server binary at $RANKING_SERVER_BIN" >&2; exit 2; }
    each test "$@"
    ;;
  check-go) check_go ;;
  *) echo "usage: $0 build|test [go|python|node|java...] | check-go" >&2; exit 2 ;;
esac
