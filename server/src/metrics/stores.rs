//! The stores as this replica sees them: its copies of the rankings (loads, versions too
//! large to hold, the version of today's served from memory), the reachability of the
//! ranking store, the pages fetched from it, and the statements a SQL session limit refused.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of a store's reachability.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    /// `ranking` (Redis, or the in-process store).
    pub store: &'static str,
}

/// Labels of the statements a SQL session limit refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SqlLimitLabels {
    /// `lock_wait` (a lock waited for as long as `RANKING_SQL_TX_TIMEOUT`) or
    /// `idle_transaction` (this session's transaction idled that long and was rolled back).
    pub limit: &'static str,
}

/// Labels of what a publication wrote to the ranking store.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WrittenLabels {
    /// `whole` (every entry of the version) or `delta` (the entries that changed since the
    /// version before, and the products gone).
    pub form: &'static str,
    /// `daily`, `weekly`, `trending` or `segment`.
    pub board: &'static str,
}

/// What the publications of one ranking store wrote, by form.
#[derive(Clone, Debug, Default)]
pub struct Written {
    /// Entries written (a delta's: its changed entries and gone products).
    pub entries: Family<WrittenLabels, Counter>,
    /// Bytes of entries written (packed copies, product indexes and deltas).
    pub bytes: Family<WrittenLabels, Counter>,
}

impl Written {
    /// Counts one publication of `entries` and `bytes` of a `board` in `form`.
    pub fn count(&self, (form, board): (&'static str, &'static str), entries: usize, bytes: usize) {
        let labels = WrittenLabels { form, board };
        self.entries.get_or_create(&labels).inc_by(entries as u64);
        self.bytes.get_or_create(&labels).inc_by(bytes as u64);
    }
}

/// The stores' metrics.
pub struct StoreMetrics {
    /// Snapshot versions installed on this replica.
    pub snapshot_loads: Counter,
    /// Versions not held in memory because they would exceed `RANKING_SNAPSHOT_MAX_ENTRIES`.
    pub snapshot_oversize: Counter,
    /// The version of today's snapshot per window (rendered with its age).
    snapshot_versions: Mutex<BTreeMap<&'static str, u64>>,
    /// 1 while this replica's last poll of a store succeeded, 0 after it failed.
    pub reachable: Family<StoreLabels, Gauge>,
    /// GetTopN pages fetched from Redis (calls beyond this shared a fetch).
    pub top_fetches: Counter,
    /// SQL statements refused by a session limit (`RANKING_SQL_TX_TIMEOUT`).
    pub sql_limits: Family<SqlLimitLabels, Counter>,
    /// What publications wrote to the ranking store (Redis).
    pub written: Written,
}

impl StoreMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let m = Self {
            snapshot_loads: Counter::default(),
            snapshot_oversize: Counter::default(),
            snapshot_versions: Mutex::default(),
            reachable: Family::default(),
            top_fetches: Counter::default(),
            sql_limits: Family::default(),
            written: Written::default(),
        };
        registry.register(
            "top_fetches",
            "GetTopN pages fetched from Redis; GetTopN calls beyond this shared a fetch",
            m.top_fetches.clone(),
        );
        registry.register(
            "snapshot_loads",
            "Ranking versions installed in this replica's memory",
            m.snapshot_loads.clone(),
        );
        registry.register(
            "snapshot_oversize",
            "Ranking versions read from Redis because they exceed RANKING_SNAPSHOT_MAX_ENTRIES",
            m.snapshot_oversize.clone(),
        );
        registry.register(
            "store_reachable",
            "1 while this replica's last poll of the store succeeded (the ranking store: every 500 ms), 0 after it failed",
            m.reachable.clone(),
        );
        registry.register(
            "published_entries",
            "Entries publications wrote to Redis: every entry of a version written whole, the changed entries \
             and gone products of one written as a delta of the version before",
            m.written.entries.clone(),
        );
        registry.register(
            "published_bytes",
            "Bytes of entries publications wrote to Redis (packed copies, product indexes, deltas), by form",
            m.written.bytes.clone(),
        );
        registry.register(
            "sql_limits_hit",
            "SQL statements refused by a session limit of RANKING_SQL_TX_TIMEOUT: a lock waited for that long \
             (lock_wait), or this replica's transaction idled that long and was rolled back (idle_transaction)",
            m.sql_limits.clone(),
        );
        m
    }

    /// Records the version of today's snapshot of `window` (`None`: none held).
    pub fn snapshot_serving(&self, window: &'static str, version: Option<u64>) {
        let mut versions = self.snapshot_versions.lock().unwrap_or_else(|e| e.into_inner());
        match version {
            Some(v) => versions.insert(window, v),
            None => versions.remove(window),
        };
    }

    /// The versions of today's snapshots and their ages, as Prometheus text (empty when
    /// none is held). A version is its publication time in Unix milliseconds, so its age
    /// needs no other record; it keeps growing while Redis is unreachable.
    pub fn render_snapshot_versions(&self) -> String {
        let versions = self.snapshot_versions.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if versions.is_empty() {
            return String::new();
        }
        let now_ms = chrono::Utc::now().timestamp_millis() as f64;
        let mut text = String::from(
            "# HELP ranking_snapshot_version Version of today's ranking served from memory.\n\
             # TYPE ranking_snapshot_version gauge\n",
        );
        for (window, v) in &versions {
            text.push_str(&format!("ranking_snapshot_version{{window=\"{window}\"}} {v}\n"));
        }
        text.push_str(
            "# HELP ranking_snapshot_age_seconds Seconds since the served version of today's ranking was published.\n\
             # TYPE ranking_snapshot_age_seconds gauge\n",
        );
        for (window, v) in &versions {
            let age = ((now_ms - *v as f64) / 1000.0).max(0.0);
            text.push_str(&format!("ranking_snapshot_age_seconds{{window=\"{window}\"}} {age:.3}\n"));
        }
        text
    }
}
