#!/usr/bin/env bash
# A local Redis Cluster of 3 masters and 3 replicas: six redis-server processes in cluster
# mode on ports FIRST … FIRST+5 (cluster bus on +10000), joined with `redis-cli --cluster
# create`. Nothing is kept on disk but the nodes' cluster files in DIR.
#
#   redis-cluster.sh start FIRST DIR [NODE_TIMEOUT_MS]
#       Starts the cluster, or reuses the one already healthy on those ports, waits until
#       every node reports cluster_state:ok, and prints the comma-separated seed URLs.
#   redis-cluster.sh stop DIR
#       Kills the nodes started in DIR and removes DIR.
set -euo pipefail

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ports() { seq "$1" $(($1 + 5)); }

healthy() {
  local p
  for p in $(ports "$1"); do
    redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || return 1
    local nodes
    nodes=$(redis-cli -p "$p" cluster nodes 2>/dev/null)
    [ "$(grep -c connected <<<"$nodes")" = 6 ] && [ "$(grep -c slave <<<"$nodes")" = 3 ] || return 1
    # A replica counts once it has copied its master: only then can a failover promote it.
    if redis-cli -p "$p" info replication 2>/dev/null | grep -q 'role:slave'; then
      redis-cli -p "$p" info replication | grep -q 'master_link_status:up' || return 1
    fi
  done
}

seeds() {
  local p out=()
  for p in $(ports "$1"); do out+=("redis://127.0.0.1:$p"); done
  (IFS=,; echo "${out[*]}")
}

stop() {
  local dir=$1 f
  for f in "$dir"/redis-*.pid; do
    [ -e "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  rm -rf "$dir"
}

case ${1:-} in
start)
  first=$2 dir=$3 timeout=${4:-2000}
  command -v redis-server >/dev/null || { echo "redis-cluster: redis-server not installed" >&2; exit 1; }
  if healthy "$first"; then seeds "$first"; exit 0; fi
  # Nodes answering without forming a healthy cluster are leftovers of an interrupted start.
  stop "$dir"
  for p in $(ports "$first"); do
    if up "$p"; then redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; fi
  done
  mkdir -p "$dir"
  for p in $(ports "$first"); do
    redis-server --daemonize yes --bind 127.0.0.1 --port "$p" --cluster-enabled yes \
      --cluster-config-file "$dir/nodes-$p.conf" --cluster-node-timeout "$timeout" \
      --save "" --appendonly no --dir "$dir" --logfile "$dir/redis-$p.log" --pidfile "$dir/redis-$p.pid"
  done
  for p in $(ports "$first"); do
    for _ in $(seq 1 100); do up "$p" && break; sleep 0.1; done
  done
  nodes=()
  for p in $(ports "$first"); do nodes+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 \
    || { cat "$dir/create.log" >&2; exit 1; }
  for _ in $(seq 1 300); do
    if healthy "$first"; then seeds "$first"; exit 0; fi
    sleep 0.1
  done
  echo "redis-cluster: the cluster on $first… did not become healthy" >&2
  exit 1
  ;;
stop)
  stop "$2"
  ;;
*)
  echo "usage: $0 start FIRST DIR [NODE_TIMEOUT_MS] | stop DIR" >&2
  exit 2
  ;;
esac
