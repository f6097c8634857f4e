//! SQL ingestion under concurrency and failure: overlapping batches from concurrent
//! writers, racing duplicates, and a database that stops mid-run. Runs on whatever backend
//! `RANKING_TEST_DATABASE` names (SQLite, PostgreSQL, MariaDB); the stop/restart test uses a
//! throwaway PostgreSQL of its own.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Barrier;

use crate::helpers::{TestApp, event};
use chrono::Utc;
use ranking_client::tonic::Code;
use ranking_client::v1::{self, EventType};
use sea_orm::{ConnectionTrait, Database, Statement};

/// Per product: (views, likes, orders, order_amount).
type Counts = BTreeMap<i64, (i64, i64, i64, i64)>;

/// A deterministic mix of events over 60 products, Zipf-like: product p gets ~1/p of them.
fn universe(n: usize, seed: u64) -> Vec<v1::Event> {
    let now = Utc::now();
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    (0..n)
        .map(|i| {
            let r = next();
            let product = 1 + ((60.0 / (1.0 + (r % 1000) as f64 / 20.0)) as i64).min(59);
            match r % 5 {
                0 => event(&format!("e{i}"), product, EventType::Order, ((r >> 8) % 100_000) as i64, now),
                1 => event(&format!("e{i}"), product, EventType::Like, 0, now),
                _ => event(&format!("e{i}"), product, EventType::View, 0, now),
            }
        })
        .collect()
}

fn expected(events: &[v1::Event]) -> Counts {
    let mut c = Counts::new();
    for e in events {
        let row = c.entry(e.product_id).or_default();
        match EventType::try_from(e.r#type) {
            Ok(EventType::View) => row.0 += 1,
            Ok(EventType::Like) => row.1 += 1,
            Ok(EventType::Order) => {
                row.2 += 1;
                row.3 += e.amount;
            }
            _ => unreachable!("the universe has views, likes and orders"),
        }
    }
    c
}

async fn stored(url: &str, table: &str) -> Counts {
    let db = Database::connect(url).await.expect("connect");
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            format!("SELECT product_id, views, likes, orders, order_amount FROM {table}"),
        ))
        .await
        .expect("query");
    let mut c = Counts::new();
    for r in rows {
        let g = |i| r.try_get_by_index::<i64>(i).expect("column");
        let row = c.entry(g(0)).or_default();
        // Daily rows of one product (one day here) add up to the all-time row.
        *row = (row.0 + g(1), row.1 + g(2), row.2 + g(3), row.3 + g(4));
    }
    c
}

/// Writer `w`'s batches: the universe shuffled by a writer-specific permutation, cut into
/// overlapping batches, with some ids repeated inside a batch.
fn batches_for(w: u64, universe: &[v1::Event], size: usize) -> Vec<Vec<v1::Event>> {
    let mut order: Vec<usize> = (0..universe.len()).collect();
    let mut s = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..order.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        order.swap(i, (s % (i as u64 + 1)) as usize);
    }
    order
        .chunks(size)
        .map(|chunk| {
            let mut b: Vec<_> = chunk.iter().map(|i| universe[*i].clone()).collect();
            b.extend(chunk.iter().take(size / 10).map(|i| universe[*i].clone())); // in-batch duplicates
            b
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_overlapping_batches_end_with_exact_counts() {
    let app = TestApp::spawn(&[]).await;
    let universe = universe(3_000, 7);
    let mut writers = Vec::new();
    for w in 0..8u64 {
        let mut client = app.client.clone();
        let batches = batches_for(w, &universe, 400);
        writers.push(tokio::spawn(async move {
            let (mut accepted, mut sent) = (0u64, 0u64);
            for b in batches {
                sent += b.len() as u64;
                let r = client
                    .record_events(v1::RecordEventsRequest { events: b })
                    .await
                    .expect("no error reaches a caller");
                accepted += u64::from(r.into_inner().accepted);
            }
            (accepted, sent)
        }));
    }
    let mut total_accepted = 0;
    for w in writers {
        total_accepted += w.await.expect("writer").0;
    }
    assert_eq!(total_accepted, 3_000, "every id accepted exactly once across all writers");
    let url = app.db.as_ref().expect("db").url.clone();
    assert_eq!(crate::helpers::count_events(&url).await, 3_000);
    let want = expected(&universe);
    assert_eq!(stored(&url, "product_metrics").await, want);
    assert_eq!(stored(&url, "product_daily_metrics").await, want);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_event_from_50_callers_is_accepted_once() {
    let app = TestApp::spawn(&[]).await;
    let e = event("racing", 11, EventType::Order, 5_000, Utc::now());
    let mut callers = Vec::new();
    for _ in 0..50 {
        let mut client = app.client.clone();
        let e = e.clone();
        callers.push(tokio::spawn(async move {
            client.record_event(v1::RecordEventRequest { event: Some(e) }).await.expect("ok").into_inner().outcome
        }));
    }
    let mut outcomes = HashMap::new();
    for c in callers {
        *outcomes.entry(c.await.expect("caller")).or_insert(0) += 1;
    }
    assert_eq!(outcomes.get(&(v1::RecordOutcome::Accepted as i32)), Some(&1));
    assert_eq!(outcomes.get(&(v1::RecordOutcome::Duplicate as i32)), Some(&49));
    let url = app.db.as_ref().expect("db").url.clone();
    assert_eq!(stored(&url, "product_metrics").await.get(&11), Some(&(0, 0, 1, 5_000)));
    app.stop().await;
}

/// A database server the test can stop and restart.
trait Outage {
    fn url(&self) -> String;
    fn stop(&self);
    fn restart(&self);
}

impl Outage for crate::helpers::pg::ThrowawayPostgres {
    fn url(&self) -> String {
        crate::helpers::pg::ThrowawayPostgres::url(self)
    }
    fn stop(&self) {
        crate::helpers::pg::ThrowawayPostgres::stop(self)
    }
    fn restart(&self) {
        crate::helpers::pg::ThrowawayPostgres::restart(self)
    }
}

impl Outage for crate::helpers::mariadb::ThrowawayMariaDb {
    fn url(&self) -> String {
        crate::helpers::mariadb::ThrowawayMariaDb::url(self)
    }
    fn stop(&self) {
        crate::helpers::mariadb::ThrowawayMariaDb::stop(self)
    }
    fn restart(&self) {
        crate::helpers::mariadb::ThrowawayMariaDb::restart(self)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_stopped_mid_run_means_unavailable_and_retries_land_exactly_once() {
    let pg = crate::helpers::pg::ThrowawayPostgres::start()
        .expect("PostgreSQL server binaries are required (make test installs them)");
    outage_then_exact_counts(&pg).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_stopped_mid_run_means_unavailable_and_retries_land_exactly_once() {
    let db = crate::helpers::mariadb::ThrowawayMariaDb::start()
        .expect("MariaDB server binaries are required (make test installs them)");
    outage_then_exact_counts(&db).await;
}

async fn outage_then_exact_counts(db: &impl Outage) {
    let app = TestApp::spawn_on(crate::helpers::settings(&db.url(), &["--db-timeout=1s"])).await;
    let universe = universe(2_000, 99);
    // Each writer sends half its batches, waits for the database to be stopped, and sends
    // the rest as a caller retrying with the same ids does, as UNAVAILABLE invites it to.
    let half_done = Arc::new(Barrier::new(5));
    let stopped = Arc::new(Barrier::new(5));
    let (refused_tx, mut refused_rx) = tokio::sync::mpsc::channel(4);
    let mut writers = Vec::new();
    for w in 0..4u64 {
        let mut client = app.client.clone();
        let batches = batches_for(w, &universe, 250);
        let (half_done, stopped, refused_tx) = (half_done.clone(), stopped.clone(), refused_tx.clone());
        writers.push(tokio::spawn(async move {
            let mut unavailable = 0;
            let half = batches.len() / 2;
            for (i, b) in batches.into_iter().enumerate() {
                if i == half {
                    half_done.wait().await;
                    stopped.wait().await;
                }
                loop {
                    match client.record_events(v1::RecordEventsRequest { events: b.clone() }).await {
                        Ok(_) => break,
                        Err(s) if s.code() == Code::Unavailable => {
                            if unavailable == 0 {
                                refused_tx.send(()).await.expect("test is listening");
                            }
                            unavailable += 1;
                            // Retry backoff, as a client does; not a wait for a state.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        Err(s) => panic!("unexpected status {s:?}"),
                    }
                }
            }
            unavailable
        }));
    }
    half_done.wait().await;
    db.stop();
    // While it is down, a write is refused, never falsely confirmed.
    let mut client = app.client.clone();
    let err = client
        .record_event(v1::RecordEventRequest { event: Some(event("while-down", 1, EventType::View, 0, Utc::now())) })
        .await
        .expect_err("no durable commit, no OK");
    assert_eq!(err.code(), Code::Unavailable, "{}", err.message());
    stopped.wait().await;
    for _ in 0..4 {
        refused_rx.recv().await.expect("every writer saw the outage");
    }
    db.restart();

    for w in writers {
        assert!(w.await.expect("writer") > 0, "each writer was refused while the database was down");
    }
    assert_eq!(stored(&db.url(), "product_metrics").await, expected(&universe));
    assert_eq!(crate::helpers::count_events(&db.url()).await, 2_000);
    app.stop().await;
}

#[tokio::test]
async fn an_order_amount_counter_at_its_limit_saturates_and_keeps_its_type() {
    let mut app = TestApp::spawn(&[]).await;
    let url = app.db.as_ref().expect("own database").url.clone();
    app.record(vec![event("first", 5, EventType::Order, 1, Utc::now())]).await;
    let db = Database::connect(&url).await.expect("connect");
    let backend = db.get_database_backend();
    let near_max = i64::MAX - 10;
    for table in ["product_metrics", "product_daily_metrics"] {
        db.execute_raw(Statement::from_string(backend, format!("UPDATE {table} SET order_amount = {near_max}")))
            .await
            .expect("seed a counter near its limit");
    }
    // A valid 10^12 order is accepted, never refused for the size of a counter.
    let r = app.record(vec![event("big", 5, EventType::Order, 1_000_000_000_000, Utc::now())]).await;
    assert_eq!(r.accepted, 1);
    for table in ["product_metrics", "product_daily_metrics"] {
        let row = db
            .query_one_raw(Statement::from_string(backend, format!("SELECT order_amount, orders FROM {table}")))
            .await
            .expect("query")
            .expect("row");
        let (amount, orders): (i64, i64) =
            (row.try_get_by_index(0).expect("an integer"), row.try_get_by_index(1).expect("orders"));
        assert_eq!((amount, orders), (i64::MAX, 2), "{table} saturates; the order still counts");
    }
    if backend == sea_orm::DbBackend::Sqlite {
        let row = db
            .query_one_raw(Statement::from_string(
                backend,
                "SELECT typeof(order_amount) FROM product_metrics".to_string(),
            ))
            .await
            .expect("query")
            .expect("row");
        assert_eq!(row.try_get_by_index::<String>(0).expect("type"), "integer", "SQLite did not widen to REAL");
    }
    // The ranking still computes (ln_1p of the daily amount is finite).
    assert_eq!(app.recompute("").await.products, 1);
    app.stop().await;
}

#[tokio::test]
async fn retention_prunes_old_events_and_days_in_chunks() {
    use ranking_server::adapters::sql::{SqlMetricsStore, SqlOptions};
    use ranking_server::domain::vocabulary::{Event, EventKind};
    use ranking_server::ports::{DatedEvent, EventLedger};

    let db = crate::helpers::TestDb::create().await;
    let store = SqlMetricsStore::connect(&SqlOptions::new(db.url.clone())).await.expect("connect");
    let now = Utc::now();
    let dated = |id: &str, days_ago: i64| {
        let at = now - chrono::Duration::days(days_ago);
        DatedEvent {
            event: Event {
                event_id: id.into(),
                product_id: 1 + days_ago,
                kind: EventKind::View,
                signal: String::new(),
                amount: 0,
                occurred_at: at,
                retracts: String::new(),
                actor_id: format!("shopper-{days_ago}"),
            },
            date: at.date_naive(),
        }
    };
    // Seven events older than 8 days, three recent ones, each a view of a shopper whose
    // views are capped (an actor row each).
    let batch: Vec<_> = (0..10).map(|i| dated(&format!("p{i}"), if i < 7 { 9 + i } else { i - 7 })).collect();
    let mut spec = ranking_server::domain::profile::ScoringProfile::built_in().spec().clone();
    spec.caps.insert("views".into(), ranking_server::domain::cap::Cap { per_actor: Some(1), actor_required: false });
    let profile = ranking_server::domain::profile::ScoringProfile::new(spec).expect("valid");
    store.record(&batch, crate::helpers::rules(&profile)).await.expect("record");
    let cutoff = now - chrono::Duration::days(8);
    let deleted = store.prune(cutoff, cutoff.date_naive(), 3).await.expect("prune");
    assert_eq!(
        deleted, 35,
        "7 events, their 7 daily rows, 7 actor rows, 7 hourly rows and 7 hourly actor rows, three rows per statement"
    );
    assert_eq!(crate::helpers::count_events(&db.url).await, 3);
    let conn = Database::connect(&db.url).await.expect("connect");
    let sql = "SELECT COUNT(*) FROM actor_counts";
    let actors = conn.query_one_raw(Statement::from_string(conn.get_database_backend(), sql)).await.expect("count");
    assert_eq!(actors.expect("row").try_get_by_index::<i64>(0).expect("count"), 3, "the actor rows of the days kept");
    let days = stored(&db.url, "product_daily_metrics").await;
    assert_eq!(days.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(stored(&db.url, "product_metrics").await.len(), 10, "all-time metrics are kept");
    let sql = "SELECT COUNT(*) FROM product_hourly_metrics";
    let hours = conn.query_one_raw(Statement::from_string(conn.get_database_backend(), sql)).await.expect("count");
    assert_eq!(hours.expect("row").try_get_by_index::<i64>(0).expect("count"), 3, "the hours of the days kept");
    db.drop_db().await;
}

#[tokio::test]
async fn custom_signals_keep_their_columns_and_a_ninth_name_is_refused() {
    use ranking_server::adapters::sql::{SqlMetricsStore, SqlOptions};
    use ranking_server::domain::vocabulary::SignalKind;
    use ranking_server::domain::vocabulary::{Event, EventKind};
    use ranking_server::ports::{DatedEvent, DayScans, EventLedger};

    let db = crate::helpers::TestDb::create().await;
    let store = SqlMetricsStore::connect(&SqlOptions::new(db.url.clone())).await.expect("connect");
    let names = |range: std::ops::Range<u32>| range.map(|i| format!("s{i}")).collect::<Vec<_>>();
    store.register_signals(&names(0..3)).await.expect("three columns");
    // A second process (another replica, a restart) finds the same columns, and more names
    // take the columns left.
    let again = SqlMetricsStore::connect(&SqlOptions::new(db.url.clone())).await.expect("connect");
    again.register_signals(&names(1..8)).await.expect("eight in all");
    let refused = again.register_signals(&names(8..9)).await.expect_err("no ninth column");
    assert!(refused.to_string().contains("\"s8\" has no column left"), "{refused}");
    assert!(matches!(refused, ranking_server::ports::StoreError::Exceeds(_)), "a bound, not corrupt data: {refused:?}");

    // Values land in the signal's column; a profile reading its signals in any order gets
    // each one's own values.
    let now = Utc::now();
    let signal = |id: &str, name: &str, kind, amount| DatedEvent {
        event: Event {
            event_id: id.into(),
            product_id: 5,
            kind: EventKind::Signal(kind),
            signal: name.into(),
            amount,
            occurred_at: now,
            retracts: String::new(),
            actor_id: String::new(),
        },
        date: now.date_naive(),
    };
    let batch = vec![
        signal("a", "s1", SignalKind::Count, 0),
        signal("b", "s1", SignalKind::Count, 0),
        signal("c", "s6", SignalKind::Amount, 40),
    ];
    let profile = ranking_server::domain::profile::ScoringProfile::built_in();
    again.record(&batch, crate::helpers::rules(&profile)).await.expect("record");
    let mut seen = Vec::new();
    store
        .scan_day(now.date_naive(), &["s6".into(), "s1".into(), "never".into()], &mut |r| {
            seen.push((r.product_id, r.metrics.custom[..3].to_vec()))
        })
        .await
        .expect("scan");
    assert_eq!(seen, vec![(5, vec![40, 2, 0])]);
    db.drop_db().await;
}
