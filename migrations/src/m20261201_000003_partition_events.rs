//! PostgreSQL only: `events` becomes a table partitioned by `metric_date`, one partition per
//! day (`events_YYYYMMDD`, created ahead by the service) and a default partition for a day
//! that has none yet. Retention then drops a past day's partition (constant time, no dead
//! tuples for VACUUM) instead of deleting its rows; at a billion events a day, deleting them
//! would cost as much as inserting them (docs/CAPACITY.md).
//!
//! A partitioned table's primary key must contain the partition key, so it becomes
//! `(event_id, metric_date)`. The idempotency rule stays "one event per id": the write path
//! looks ids up across every partition before inserting (an index probe per retained day),
//! and a redelivery, which has the same `occurred_at` and so the same day, meets the primary
//! key in the same partition. Existing rows are moved into their days' partitions.
//!
//! MySQL/MariaDB and SQLite keep the plain table: nothing happens there.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261201_000003_partition_events"
    }
}

const UP: &str = r"
ALTER TABLE events RENAME TO events_unpartitioned;
ALTER TABLE events_unpartitioned RENAME CONSTRAINT events_pkey TO events_unpartitioned_pkey;
ALTER INDEX idx_events_occurred_at RENAME TO idx_events_unpartitioned_occurred_at;
CREATE TABLE events (
    event_id varchar(128) NOT NULL,
    product_id bigint NOT NULL,
    event_type smallint NOT NULL,
    amount bigint NOT NULL,
    occurred_at bigint NOT NULL,
    metric_date date NOT NULL,
    recorded_at bigint NOT NULL,
    PRIMARY KEY (event_id, metric_date)
) PARTITION BY RANGE (metric_date);
CREATE INDEX idx_events_occurred_at ON events (occurred_at);
CREATE TABLE events_default PARTITION OF events DEFAULT;
DO $$
DECLARE d date;
BEGIN
    FOR d IN SELECT DISTINCT metric_date FROM events_unpartitioned LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
                       'events_' || to_char(d, 'YYYYMMDD'), d, d + 1);
    END LOOP;
END $$;
INSERT INTO events (event_id, product_id, event_type, amount, occurred_at, metric_date, recorded_at)
    SELECT event_id, product_id, event_type, amount, occurred_at, metric_date, recorded_at FROM events_unpartitioned;
DROP TABLE events_unpartitioned;
";

const DOWN: &str = r"
CREATE TABLE events_plain (
    event_id varchar(128) NOT NULL PRIMARY KEY,
    product_id bigint NOT NULL,
    event_type smallint NOT NULL,
    amount bigint NOT NULL,
    occurred_at bigint NOT NULL,
    metric_date date NOT NULL,
    recorded_at bigint NOT NULL
);
INSERT INTO events_plain SELECT DISTINCT ON (event_id)
    event_id, product_id, event_type, amount, occurred_at, metric_date, recorded_at
    FROM events ORDER BY event_id, recorded_at;
DROP TABLE events;
ALTER TABLE events_plain RENAME TO events;
ALTER TABLE events RENAME CONSTRAINT events_plain_pkey TO events_pkey;
CREATE INDEX idx_events_occurred_at ON events (occurred_at);
";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        manager.get_connection().execute_unprepared(UP).await.map(drop)
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        manager.get_connection().execute_unprepared(DOWN).await.map(drop)
    }
}
