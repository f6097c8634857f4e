//! `profiles`: scoring profiles at scale. Recompute of one day of `products` products (the
//! day, its week and the carry-over chain) with the built-in profile and with a profile of
//! 6 signals and 4 axes (12 digits), in interleaved rounds on one throwaway PostgreSQL, each
//! in a release server process of its own: wall time, server elapsed and the server's peak
//! resident memory. Then
//! RecordEvents with 2 custom signals in the mix: events/s and statements per batch.
//!
//! `--caps`: the second profile is the distinct-viewers one (`per_actor = 1` on views)
//! instead: a recompute reads the day's rows, where the caps' values already are.
//! `--variants`: the second server runs the built-in profile with a variant beside it
//! (`RANKING_PROFILES`), and a Recompute call ranks the day for both: the wall time of the
//! call is compared (its `elapsed_ms` is the service profile's part alone).

use std::time::Instant;

use chrono::Utc;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database};

use crate::helpers::pg;
use crate::serve;

/// 4 built-in signals and 2 custom ones in the main score; 4 axes of 3 digits.
const SIX_SIGNALS: &str = r#"
carry_over = 0.1
carry_days = 7
[signals.cart_adds]
kind = "count"
[signals.dwell_ms]
kind = "amount"
[[main]]
signal = "views"
weight = 0.1
[[main]]
signal = "likes"
weight = 0.2
[[main]]
signal = "orders"
weight = 0.5
[[main]]
signal = "order_amount"
weight = 0.6
transform = "log1p"
[[main]]
signal = "cart_adds"
weight = 0.3
transform = "log1p"
[[main]]
signal = "dwell_ms"
weight = 0.05
transform = "log1p"
[[axes]]
signal = "cart_adds"
digits = 3
[[axes]]
signal = "views"
digits = 3
[[axes]]
signal = "dwell_ms"
digits = 3
[[axes]]
signal = "recency"
digits = 3
"#;

/// Registers the two custom signals for the columns [`crate::recompute::seed_day`] filled.
async fn register_signals(url: &str) {
    let db = Database::connect(url).await.expect("connect");
    db.execute_unprepared("INSERT INTO signal_slots (signal_name, slot) VALUES ('cart_adds', 1), ('dwell_ms', 2)")
        .await
        .expect("register the signals");
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// What the built-in profile is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Other {
    SixSignals,
    Capped,
    Variant,
}

pub async fn bench_profiles(products: i64, redis: &str, mode: Other) {
    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let today = Utc::now().date_naive();
    let profile = std::env::temp_dir().join(format!("bench-profile-{:x}.toml", Utc::now().timestamp_micros()));
    let (text, other) = match mode {
        Other::Capped => (
            include_str!("../../deploy/profiles/distinct-viewers.toml"),
            "distinct viewers (views capped per_actor = 1)",
        ),
        Other::SixSignals => (SIX_SIGNALS, "6 signals, 4 axes, 12 digits"),
        Other::Variant => {
            (include_str!("../../deploy/profiles/likes-first.toml"), "built-in + variant `likes` (2 lanes)")
        }
    };
    std::fs::write(&profile, text).expect("profile file");
    // Migrations first, from a server that is then stopped.
    serve(&[format!("--database-url={}", pg.url())]).await.stop().await;
    crate::recompute::seed_day_with(&pg.url(), today, products, true).await;
    register_signals(&pg.url()).await;

    // Each recompute in a server process of its own (the release binary), so that its peak
    // resident memory is that recompute's alone: the start-up recompute, then the timed one.
    let rounds = 3;
    /// A profile's rounds: wall seconds, server elapsed ms, server peak RSS MB.
    type Rounds = (&'static str, Vec<f64>, Vec<f64>, Vec<f64>);
    let mut results: Vec<Rounds> =
        vec![("built-in (4 signals, 3 axes, 9 digits)", vec![], vec![], vec![]), (other, vec![], vec![], vec![])];
    for round in 0..rounds {
        for (i, with_profile) in [false, true].into_iter().enumerate() {
            let prefix = format!("bench-profiles-{round}-{i}-{:x}", Utc::now().timestamp_micros());
            let mut envs = vec![
                ("DATABASE_URL", pg.url()),
                ("REDIS_URL", redis.to_string()),
                ("RANKING_REDIS_PREFIX", prefix.clone()),
                ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
            ];
            match (with_profile, mode) {
                (false, _) => {}
                (true, Other::Variant) => envs.push(("RANKING_PROFILES", format!("likes={}", profile.display()))),
                (true, _) => envs.push(("RANKING_PROFILE", profile.display().to_string())),
            }
            let server = crate::helpers::process::ServerProcess::start(&envs).await;
            let mut client = ranking_client::connect(format!("http://{}", server.addr)).await.expect("connect");
            // The start-up recompute first: the timed call then runs alone.
            ranking_server::test_support::eventually("the start-up recompute published today", || {
                let mut c = client.clone();
                async move {
                    c.get_top_n(v1::GetTopNRequest::default())
                        .await
                        .is_ok_and(|r| r.into_inner().total == products as u64)
                }
            })
            .await;
            let started = Instant::now();
            let r =
                client.recompute(v1::RecomputeRequest { date: String::new() }).await.expect("recompute").into_inner();
            let wall = started.elapsed().as_secs_f64();
            let peak = crate::status_mb(&server.pid().to_string(), "VmHWM:");
            assert_eq!(r.products, products as u64, "every product ranked");
            results[i].1.push(wall);
            // With a variant, the call ranks both lanes; its elapsed_ms is the first's alone.
            results[i].2.push(if mode == Other::Variant { wall * 1_000.0 } else { r.elapsed_ms as f64 });
            results[i].3.push(peak);
            server.terminate();
            server.wait().await;
            let conn = crate::helpers::redis_connection(redis, ranking_server::adapters::redis::RedisMode::Single);
            crate::helpers::delete_keys(&conn, &prefix).await;
        }
    }
    let _ = std::fs::remove_file(&profile);
    println!(
        "\n## Recompute with scoring profiles at {products} products (throwaway PostgreSQL, median of {rounds} interleaved rounds)\n"
    );
    println!("| profile | wall s | server elapsed ms | server peak RSS MB | rounds (elapsed ms / peak MB) |");
    println!("|---|---:|---:|---:|---|");
    let mut medians = Vec::new();
    for (name, wall, elapsed, peak) in &mut results {
        let each: Vec<String> = elapsed.iter().zip(peak.iter()).map(|(e, p)| format!("{e:.0} / {p:.0}")).collect();
        let m = (median(wall), median(elapsed), median(peak));
        println!("| {name} | {:.2} | {:.0} | {:.0} | {} |", m.0, m.1, m.2, each.join(", "));
        medians.push(m);
    }
    // The target is judged on the rounds' own ratios: each 6-signal recompute against the
    // built-in one of its round.
    let mut time: Vec<f64> = results[1].2.iter().zip(&results[0].2).map(|(a, b)| a / b).collect();
    let mut memory: Vec<f64> = results[1].3.iter().zip(&results[0].3).map(|(a, b)| a / b).collect();
    let (name, target) = match mode {
        Other::Capped => ("capped", "1.1"),
        Other::SixSignals => ("6-signal", "1.3"),
        Other::Variant => ("two profiles", "1.6"),
    };
    println!(
        "\n{name} / built-in, median of the rounds' ratios: time {:.2}×, memory {:.2}× (target ≤ {target}×); \
         ratio of the medians: time {:.2}×, memory {:.2}×",
        median(&mut time),
        median(&mut memory),
        medians[1].1 / medians[0].1,
        medians[1].2 / medians[0].2
    );
}
