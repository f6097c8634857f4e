-- The lookup of stored event ids on PostgreSQL, as a plain join and as the LATERAL probe the
-- store uses, in the custom plan PostgreSQL makes for a prepared statement's first
-- executions on a connection and in the generic plan it may settle on after them.
--
--   psql -h 127.0.0.1 -U postgres -d test -f docs/benchmarks/2026-12-03-lookup-plans.sql
--
-- The ledger: the migrated `events` table, day partitions from 2026-11-25 to 2026-12-06 and
-- the default one, 200,000 events on each of eight past days and 1,000,000 today, ids
-- growing with time; then a batch of 5,000 fresh ids after every stored one, and 5,000
-- stored ones (a redelivered batch).
DROP DATABASE IF EXISTS lookup_plans;
CREATE DATABASE lookup_plans;
\c lookup_plans
CREATE TABLE events (
    event_id varchar(128) NOT NULL, product_id bigint NOT NULL, event_type smallint NOT NULL,
    amount bigint NOT NULL, occurred_at bigint NOT NULL, metric_date date NOT NULL,
    recorded_at bigint NOT NULL, PRIMARY KEY (event_id, metric_date)
) PARTITION BY RANGE (metric_date);
CREATE INDEX idx_events_occurred_at ON events (occurred_at);
CREATE TABLE events_default PARTITION OF events DEFAULT;
DO $$ DECLARE d date; BEGIN
  FOR d IN SELECT generate_series('2026-11-25'::date, '2026-12-06'::date, interval '1 day')::date LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
                   'events_' || to_char(d, 'YYYYMMDD'), d, d + 1);
  END LOOP; END $$;
INSERT INTO events SELECT 'd' || to_char(d, 'YYYYMMDD') || '-' || lpad(i::text, 9, '0'), i % 100000, 1, 0, i, d, 0
  FROM generate_series('2026-11-25'::date, '2026-12-02'::date, interval '1 day') d, generate_series(1, 200000) i;
INSERT INTO events SELECT 'd20261203-' || lpad(i::text, 9, '0'), i % 100000, 1, 0, i, '2026-12-03', 0
  FROM generate_series(1, 1000000) i;
ANALYZE events;
PREPARE joined(text[]) AS SELECT e.event_id, e.product_id, e.event_type, e.amount, e.occurred_at
  FROM UNNEST($1::text[]) AS ids(id) JOIN events e ON e.event_id = ids.id;
PREPARE probed(text[]) AS SELECT e.event_id, e.product_id, e.event_type, e.amount, e.occurred_at
  FROM UNNEST($1::text[]) AS ids(id) CROSS JOIN LATERAL
  (SELECT event_id, product_id, event_type, amount, occurred_at FROM events WHERE event_id = ids.id LIMIT 1) e;
SELECT array_agg('d20261203-' || lpad(i::text, 9, '0'))::text AS fresh FROM generate_series(1000001, 1005000) i \gset
SELECT array_agg('d20261203-' || lpad(i::text, 9, '0'))::text AS stored FROM generate_series(500001, 505000) i \gset
SET plan_cache_mode = force_custom_plan;
\echo joined, custom plan, fresh ids
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE joined(:'fresh');
\echo probed, custom plan, fresh ids
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE probed(:'fresh');
\echo probed, custom plan, stored ids
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE probed(:'stored');
SET plan_cache_mode = force_generic_plan;
\echo joined, generic plan, fresh ids
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE joined(:'fresh');
\echo probed, generic plan, fresh ids
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE probed(:'fresh');
\echo probed, generic plan, stored ids
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE probed(:'stored');
\c test
DROP DATABASE lookup_plans;
