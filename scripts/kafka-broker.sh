#!/usr/bin/env bash
# The Kafka-compatible broker of the bus tests: tansu 0.6.0 (crates.io, Apache-2.0) with its
# SQLite storage engine (its memory engine loses committed offsets; see docs/OPERATIONS.md).
# Its DeleteTopics of one topic removes every topic of the broker: tests never delete theirs.
#
#   scripts/kafka-broker.sh install        build it once per machine into the user's cache,
#                                          outside any clone, keyed by its version; prints the binary
#   scripts/kafka-broker.sh start PORT DIR  start one on 127.0.0.1:PORT with its data in DIR
#                                          (reused when one answers there); prints its address
#   scripts/kafka-broker.sh stop DIR        kill the one started with DIR
set -euo pipefail

TANSU_VERSION=0.6.0
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ranking-service
ROOT=$CACHE/tansu-$TANSU_VERSION
BIN=$ROOT/bin/tansu

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

install() {
  if [ ! -x "$BIN" ]; then
    mkdir -p "$CACHE"
    # Its own target dir under the cache: an interrupted build resumes where it stopped.
    CARGO_TARGET_DIR=$CACHE/tansu-build cargo install --quiet --locked tansu \
      --version "$TANSU_VERSION" --no-default-features --features libsql --root "$ROOT" >&2
    rm -rf "$CACHE/tansu-build"
  fi
  echo "$BIN"
}

case ${1:-} in
  install) install ;;
  start)
    port=${2:?port}; dir=${3:?data dir}
    if ! up "$port"; then
      install >/dev/null
      mkdir -p "$dir"
      # The storage URL is relative to the working directory: start it in its data dir.
      # Detached from every descriptor of the caller, so a `$(…)` around this returns.
      (cd "$dir" && exec setsid "$BIN" broker --storage-engine sqlite://tansu.db \
        --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
        </dev/null >broker.log 2>&1 & echo $! >"$dir/broker.pid")
      for _ in $(seq 1 120); do up "$port" && break; sleep 0.25; done
      up "$port" || { echo "kafka-broker: tansu did not come up on $port (see $dir/broker.log)" >&2; exit 1; }
    fi
    echo "127.0.0.1:$port"
    ;;
  stop)
    dir=${2:?data dir}
    # SIGKILL: the tests stop it as a crash would (SQLite keeps what it committed).
    [ -f "$dir/broker.pid" ] && kill -KILL "$(cat "$dir/broker.pid")" 2>/dev/null || true
    ;;
  *) echo "usage: $0 install | start PORT DIR | stop DIR" >&2; exit 2 ;;
esac
