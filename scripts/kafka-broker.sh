#!/usr/bin/env bash
# Apache Kafka for the bus tests and benchmarks: the broker's own jars from Maven Central
# (scripts/kafka/pom.xml), resolved once per machine into a cache outside any clone, keyed by
# the Kafka version, and run with the machine's Java 17 in KRaft mode (no ZooKeeper).
#
#   kafka-broker.sh install                 resolve the jars into the cache; prints its folder
#   kafka-broker.sh start PORT DIR          one combined broker/controller on 127.0.0.1:PORT,
#                                           its data in DIR (reused when one answers there);
#                                           prints its bootstrap address
#   kafka-broker.sh start-cluster BASE DIR  three combined brokers/controllers on BASE, BASE+1,
#                                           BASE+2 (replication factor 3, min.insync.replicas 2);
#                                           starts those that do not answer, so it also restarts
#                                           a killed one; prints the bootstrap list
#   kafka-broker.sh stop DIR                stop every broker started with DIR (SIGTERM, then
#                                           SIGKILL after 30 s)
#   kafka-broker.sh kill DIR NODE           SIGKILL node NODE (1-3) of the cluster in DIR, as a
#                                           crash would; `start-cluster` brings it back
#   kafka-broker.sh signal DIR NODE SIG     sends SIG (STOP, CONT, …) to node NODE
#   kafka-broker.sh pid DIR NODE            its process id
#   kafka-broker.sh run CLASS ARGS…         a Kafka tool from the same jars, e.g.
#                                           org.apache.kafka.tools.ConsumerPerformance
#
# Each broker's heap is at most RANKING_KAFKA_HEAP (default 768m, never above 1 GiB).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
POM=$HERE/kafka/pom.xml
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ranking-service/kafka-$KAFKA_VERSION
HEAP=${RANKING_KAFKA_HEAP:-768m}

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The process of the broker whose folder is $1, found by its command line: the one record of
# it (a pid file kept beside it went stale whenever a start lost the race for the port).
node_pid() { { pgrep -f -- "kafka.Kafka $1/server.properties" || true; } | head -n 1; }

fail() {
  echo "kafka-broker: $*" >&2
  exit 1
}

# The jars, resolved by Maven from the pom; the pom's digest is kept beside them, so a changed
# pom (another log4j, another tool) resolves again under the same version's folder.
install() {
  local digest
  digest=$(sha256sum "$POM" | cut -d' ' -f1)
  if [ "$(cat "$CACHE/pom.sha256" 2>/dev/null)" != "$digest" ]; then
    command -v mvn >/dev/null || fail "mvn not found: Maven 3 resolves the broker's jars"
    command -v java >/dev/null || fail "java not found: the broker needs Java 17 or later"
    rm -rf "$CACHE.tmp" && mkdir -p "$CACHE.tmp"
    mvn -q -B -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$CACHE.tmp/libs" >"$CACHE.tmp/maven.log" 2>&1 \
      || fail "Maven could not resolve the broker's jars (see $CACHE.tmp/maven.log)"
    cat >"$CACHE.tmp/log4j2.properties" <<'EOF'
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.coordinator.name = org.apache.kafka.coordinator
logger.coordinator.level = INFO
EOF
    echo "$digest" >"$CACHE.tmp/pom.sha256"
    rm -rf "$CACHE" && mv "$CACHE.tmp" "$CACHE"
  fi
  echo "$CACHE"
}

java_run() {
  local main=$1
  shift
  exec java -Xms64m -Xmx256m -Dlog4j2.configurationFile="$CACHE/log4j2.properties" \
    -Dkafka.logs.dir="${TOOL_LOGS:-/tmp}" -cp "$CACHE/libs/*" "$main" "$@"
}

# A free port below the kernel's ephemeral range (32768 and up by default), so that no
# socket bound to port 0 or connecting out takes a stopped broker's port before it restarts.
free_port() {
  python3 -c '
import random, socket
while True:
    port = random.randrange(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    print(port)
    break
'
}

# The properties of node $1 of a quorum: client port $2, controller port $3, voters $4, the
# replication of internal topics $5 and min.insync.replicas $6, data under $7.
properties() {
  cat <<EOF
process.roles=broker,controller
node.id=$1
controller.quorum.voters=$4
listeners=PLAINTEXT://127.0.0.1:$2,CONTROLLER://127.0.0.1:$3
advertised.listeners=PLAINTEXT://127.0.0.1:$2
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$7/data
num.partitions=1
default.replication.factor=$5
min.insync.replicas=$6
offsets.topic.replication.factor=$5
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=$5
transaction.state.log.min.isr=$6
share.coordinator.state.topic.replication.factor=$5
share.coordinator.state.topic.min.isr=$6
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
# The tests' throwaway topics: small segments, and a killed broker back within seconds.
log.segment.bytes=67108864
controlled.shutdown.enable=true
EOF
}

# Starts node $1 of the quorum in $2 unless its port answers. Its ports are fixed at its first
# start (client port $3, controller port in DIR/controller.port), so a restart reuses them.
start_node() {
  local node=$1 dir=$2 port=$3 voters=$4 replication=$5 isr=$6
  up "$port" && return 0
  # Still starting (a JVM under load takes tens of seconds to listen): wait for it instead.
  [ -n "$(node_pid "$dir")" ] && return 0
  mkdir -p "$dir/logs"
  local cport
  cport=$(cat "$dir/controller.port")
  properties "$node" "$port" "$cport" "$voters" "$replication" "$isr" "$dir" >"$dir/server.properties"
  if [ ! -f "$dir/data/meta.properties" ]; then
    java -Xmx256m -Dlog4j2.configurationFile="$CACHE/log4j2.properties" -Dkafka.logs.dir="$dir/logs" \
      -cp "$CACHE/libs/*" kafka.tools.StorageTool format --ignore-formatted \
      -t "$(cat "$dir/../cluster.id")" -c "$dir/server.properties" >"$dir/logs/format.log" 2>&1 \
      || fail "formatting node $node's storage failed (see $dir/logs/format.log)"
  fi
  # Detached from every descriptor of the caller, so a `$(…)` around this returns.
  (setsid java -Xms256m -Xmx"$HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$CACHE/log4j2.properties" -Dkafka.logs.dir="$dir/logs" \
    -cp "$CACHE/libs/*" kafka.Kafka "$dir/server.properties" \
    </dev/null >"$dir/logs/stdout.log" 2>&1 &)
}

# Waits until the brokers at $1 (a bootstrap list) all answer metadata: $2 of them listed.
wait_metadata() {
  local bootstrap=$1 want=$2 dir=$3 listed
  for _ in $(seq 1 90); do
    listed=$(java -Xmx128m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$CACHE/log4j2.properties" \
      -Dkafka.logs.dir="$dir" -cp "$CACHE/libs/*" org.apache.kafka.tools.BrokerApiVersionsCommand \
      --bootstrap-server "$bootstrap" 2>/dev/null | grep -c '(id: ' || true)
    [ "$listed" -ge "$want" ] && return 0
    sleep 1
  done
  fail "the brokers at $bootstrap did not all answer metadata within 90 s (logs under $dir)"
}

# Makes the quorum in $1 of $2 nodes on client ports $3, $3+1, …: fixes its cluster id and
# controller ports once, then starts each node that does not answer.
quorum() {
  local dir=$1 nodes=$2 base=$3 replication=$4 isr=$5
  mkdir -p "$dir"
  [ -f "$dir/cluster.id" ] || java -Xmx128m -cp "$CACHE/libs/*" kafka.tools.StorageTool random-uuid >"$dir/cluster.id"
  local voters="" n
  for n in $(seq 1 "$nodes"); do
    mkdir -p "$dir/node-$n"
    [ -f "$dir/node-$n/controller.port" ] || free_port >"$dir/node-$n/controller.port"
    voters="$voters${voters:+,}$n@127.0.0.1:$(cat "$dir/node-$n/controller.port")"
  done
  local bootstrap="" started=
  for n in $(seq 1 "$nodes"); do
    local port=$((base + n - 1))
    bootstrap="$bootstrap${bootstrap:+,}127.0.0.1:$port"
    if ! up "$port"; then
      start_node "$n" "$dir/node-$n" "$port" "$voters" "$replication" "$isr"
      started=1
    fi
  done
  [ -n "$started" ] && wait_metadata "$bootstrap" "$nodes" "$dir"
  echo "$bootstrap"
}

stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

case ${1:-} in
  install) install ;;
  start)
    port=${2:?port}
    dir=${3:?data dir}
    if up "$port"; then echo "127.0.0.1:$port"; exit 0; fi
    install >/dev/null
    quorum "$dir" 1 "$port" 1 1
    ;;
  start-cluster)
    base=${2:?base port}
    dir=${3:?data dir}
    install >/dev/null
    quorum "$dir" 3 "$base" 3 2
    ;;
  stop)
    dir=${2:?data dir}
    for node in "$dir"/node-*; do
      pid=$(node_pid "$node")
      if [ -n "$pid" ]; then stop_pid "$pid"; fi
    done
    ;;
  kill | signal)
    dir=${2:?data dir}
    node=${3:?node}
    sig=KILL
    [ "$1" = signal ] && sig=${4:?signal}
    pid=$(node_pid "$dir/node-$node")
    [ -n "$pid" ] || fail "no node $node running under $dir"
    kill -"$sig" "$pid"
    ;;
  pid)
    node_pid "${2:?data dir}/node-${3:?node}"
    ;;
  run)
    shift
    install >/dev/null
    java_run "$@"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
    exit 2
    ;;
esac
