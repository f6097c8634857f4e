#!/usr/bin/env bash
# Makes sure the servers the integration tests need answer on their standard local ports:
# PostgreSQL 15, MariaDB, Redis and NATS with JetStream. A server that answers is reused as it
# is (so a machine's own servers, or those the README's variables point the tests at, are
# left alone); one that does not is installed with apt-get when missing, configured the way the
# tests expect and started:
#
#   PostgreSQL  trust authentication on 127.0.0.1 and ::1, user postgres, database `test`
#   MariaDB     root over TCP on 127.0.0.1 with an empty password, database `test`
#   Redis       no persistence
#   NATS        JetStream, its store under /tmp
#
# Idempotent: with everything up it only probes four ports. Apache Kafka is started by
# scripts/kafka-broker.sh (the Makefile asks it for a broker). Exit codes: 0 all answer,
# 1 a server could not be installed or started (the message says which and where its log is).
set -euo pipefail

PG_PORT=${PG_PORT:-5432}
MYSQL_PORT=${MYSQL_PORT:-3306}
REDIS_PORT=${REDIS_PORT:-6379}
NATS_PORT=${NATS_PORT:-4222}
PG_VERSION=15
LOGS=${RANKING_TEST_LOGS:-/tmp}

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

fail() {
  echo "test-services: $*" >&2
  exit 1
}

wait_up() {
  local port=$1 name=$2 log=$3
  for _ in $(seq 1 120); do up "$port" && return 0; sleep 0.5; done
  fail "$name did not come up on port $port within 60 s (its log: $log)"
}

APT_UPDATED=
apt_install() {
  [ "$(id -u)" = 0 ] || fail "$* missing and this is not root: install it, or point the tests at a server (README, 'Two commands')"
  command -v apt-get >/dev/null || fail "$* missing and there is no apt-get: install it by hand"
  if [ -z "$APT_UPDATED" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || fail "apt-get update failed"
    APT_UPDATED=1
  fi
  echo "test-services: installing $*" >&2
  # policy-rc.d 101: the packages' own service starts are skipped; this script starts them
  # with the settings the tests need.
  local policy=/usr/sbin/policy-rc.d created=
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1; fi
  local status=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >"$LOGS/ranking-test-apt.log" 2>&1 || status=$?
  [ -n "$created" ] && rm -f "$policy"
  [ "$status" = 0 ] || fail "apt-get install $* failed (exit $status; see $LOGS/ranking-test-apt.log)"
}

start_redis() {
  up "$REDIS_PORT" && return 0
  command -v redis-server >/dev/null || apt_install redis-server
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /tmp --logfile "$LOGS/ranking-test-redis.log" || fail "redis-server did not start"
  wait_up "$REDIS_PORT" Redis "$LOGS/ranking-test-redis.log"
}

start_postgres() {
  up "$PG_PORT" && return 0
  [ -x "/usr/lib/postgresql/$PG_VERSION/bin/postgres" ] || apt_install "postgresql-$PG_VERSION" postgresql-client-common
  if [ ! -d "/etc/postgresql/$PG_VERSION/main" ]; then
    pg_createcluster "$PG_VERSION" main --port "$PG_PORT" >/dev/null || fail "pg_createcluster $PG_VERSION main failed"
  fi
  local conf=/etc/postgresql/$PG_VERSION/main
  # The tests log in as postgres without a password over TCP; each test makes a database of its
  # own and many run at once.
  if ! grep -q '^# ranking-service tests' "$conf/pg_hba.conf"; then
    local hba
    hba=$(cat "$conf/pg_hba.conf")
    printf '# ranking-service tests: trust on loopback\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n%s\n' \
      "$hba" >"$conf/pg_hba.conf"
  fi
  mkdir -p "$conf/conf.d"
  printf "port = %s\nlisten_addresses = '127.0.0.1'\nmax_connections = 500\n" "$PG_PORT" >"$conf/conf.d/ranking-tests.conf"
  local log=/var/log/postgresql/postgresql-$PG_VERSION-main.log
  pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main start >/dev/null 2>&1 \
    || pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main restart >/dev/null 2>&1 \
    || fail "PostgreSQL $PG_VERSION did not start (its log: $log)"
  wait_up "$PG_PORT" PostgreSQL "$log"
  for _ in $(seq 1 60); do psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -Atqc 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.5; done
  if [ -z "$(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -Atqc "SELECT 1 FROM pg_database WHERE datname = 'test'")" ]; then
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc 'CREATE DATABASE test' || fail "PostgreSQL: CREATE DATABASE test failed"
  fi
}

start_mariadb() {
  up "$MYSQL_PORT" && return 0
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server mariadb-client
  local log=$LOGS/ranking-test-mariadb.log
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
  if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$log" 2>&1 || fail "mariadb-install-db failed (see $log)"
  fi
  # Detached from every descriptor of the caller, so `make` does not wait for it.
  setsid /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 --port="$MYSQL_PORT" \
    --max-connections=500 --skip-name-resolve --log-error="$log" </dev/null >/dev/null 2>&1 &
  wait_up "$MYSQL_PORT" MariaDB "$log"
  # Root over the socket (unix_socket authentication as the system's root) grants root over
  # TCP from loopback with an empty password, as the tests' URL expects. Without name
  # resolution a TCP client from 127.0.0.1 is that account, never root@localhost, whose
  # socket-or-password authentication sqlx's client does not get through.
  mariadb --protocol=socket -uroot >/dev/null <<'SQL' || fail "MariaDB: granting root over TCP failed (run this script as root once)"
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
CREATE USER IF NOT EXISTS 'root'@'::1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'root'@'::1' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS test;
FLUSH PRIVILEGES;
SQL
}

start_nats() {
  up "$NATS_PORT" && return 0
  [ -x /usr/sbin/nats-server ] || command -v nats-server >/dev/null || apt_install nats-server
  local bin log=$LOGS/ranking-test-nats.log
  bin=$(command -v nats-server || echo /usr/sbin/nats-server)
  mkdir -p /tmp/ranking-test-nats
  setsid "$bin" -a 127.0.0.1 -p "$NATS_PORT" -js -sd /tmp/ranking-test-nats -l "$log" </dev/null >/dev/null 2>&1 &
  wait_up "$NATS_PORT" "NATS (JetStream)" "$log"
}

start_redis
start_postgres
start_mariadb
start_nats
echo "test-services: PostgreSQL :$PG_PORT, MariaDB :$MYSQL_PORT, Redis :$REDIS_PORT, NATS :$NATS_PORT answer"
