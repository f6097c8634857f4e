#!/usr/bin/env bash
# Makes sure the servers the integration tests need are reachable: PostgreSQL, MariaDB,
# Redis and NATS with JetStream on their standard local ports. A server that is not answering is started from the
# local installation (and installed with apt-get first when missing and running as root).
set -euo pipefail

PG_PORT=${PG_PORT:-5432}
MYSQL_PORT=${MYSQL_PORT:-3306}
REDIS_PORT=${REDIS_PORT:-6379}
NATS_PORT=${NATS_PORT:-4222}

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_up() {
  local port=$1 name=$2
  for _ in $(seq 1 60); do up "$port" && return 0; sleep 0.5; done
  echo "test-services: $name did not come up on port $port" >&2
  return 1
}

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "test-services: $* missing and not root; install it or point the tests at a server" >&2
    return 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! up "$REDIS_PORT"; then
  command -v redis-server >/dev/null || apt_install redis-server
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /tmp --logfile /tmp/ranking-test-redis.log
  wait_up "$REDIS_PORT" Redis
fi

if ! up "$PG_PORT"; then
  ls /etc/postgresql >/dev/null 2>&1 || apt_install postgresql
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  wait_up "$PG_PORT" PostgreSQL
fi

if ! up "$MYSQL_PORT"; then
  command -v mariadbd >/dev/null || apt_install mariadb-server
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
  wait_up "$MYSQL_PORT" MariaDB
fi
if ! up "$NATS_PORT"; then
  command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || apt_install nats-server
  mkdir -p /tmp/ranking-test-nats
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p "$NATS_PORT" -js -sd /tmp/ranking-test-nats -l /tmp/ranking-test-nats.log
  wait_up "$NATS_PORT" "NATS (JetStream)"
fi
echo "test-services: PostgreSQL :$PG_PORT, MariaDB :$MYSQL_PORT, Redis :$REDIS_PORT, NATS :$NATS_PORT reachable"
