//! The trending board, end to end: the hourly rows SQL keeps are what the events say (caps
//! per hour, retractions in their original's hour, redeliveries once, either arrival order),
//! and the served board is an independent computation from the events alone at the instant
//! its version says (ExplainRank's `trending_at`), after a recompute and after a live pass.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration as Age, DurationRound, Utc};
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database, Statement};

use crate::caps::{DISTINCT_VIEWERS, view_by};
use crate::helpers::{Draw, ProfileFile, TestApp, event, independent_norm, retract, views};

const HOUR_US: i64 = 3_600_000_000;

/// The default half-life, 6 hours.
const HALF_LIFE_US: f64 = 6.0 * 3_600_000_000.0;

/// One product-hour as the reference sees it.
#[derive(Debug, Clone, Default, PartialEq)]
struct Hour {
    /// Non-retracted views per actor (`None`: without one).
    views: BTreeMap<Option<String>, i64>,
    likes: i64,
    orders: i64,
    order_amount: i64,
    /// Latest original of the hour, retracted or not (Unix microseconds).
    last_us: i64,
}

impl Hour {
    /// The hour's row under per_actor = 1 views: each actor once, each view without an actor.
    fn row(&self) -> [i64; 5] {
        let views = self.views.iter().map(|(actor, n)| if actor.is_some() { (*n).min(1) } else { *n }).sum();
        [views, self.likes, self.orders, self.order_amount, self.last_us]
    }
}

/// Events over the last 12 hours (originals, retractions sent after them and before them,
/// redeliveries) and the reference's product-hours (`(product, hour start)`).
pub(crate) struct HourWorkload {
    pub originals: Vec<v1::Event>,
    pub retractions: Vec<v1::Event>,
    pub early: Vec<v1::Event>,
    hours: BTreeMap<(i64, i64), Hour>,
}

pub(crate) fn hour_workload(now: DateTime<Utc>, seed: u64) -> HourWorkload {
    let mut draw = Draw(seed);
    let mut w =
        HourWorkload { originals: Vec::new(), retractions: Vec::new(), early: Vec::new(), hours: BTreeMap::new() };
    for product in 1..=20i64 {
        for n in 0..draw.next(60) {
            let at = now - Age::minutes(draw.next(12 * 60) as i64);
            let id = |what: &str| format!("{what}-{product}-{n}");
            let us = at.timestamp_micros();
            let hour = w.hours.entry((product, us - us.rem_euclid(HOUR_US))).or_default();
            hour.last_us = hour.last_us.max(us);
            let retracted = draw.next(12) == 0;
            match draw.next(10) {
                0..=5 => {
                    // A bot sends many views; most shoppers one or two.
                    let actor = match draw.next(6) {
                        0 => Some("bot".to_string()),
                        1 => None,
                        _ => Some(format!("shopper-{}", draw.next(3))),
                    };
                    w.originals.push(view_by(&id("v"), product, actor.as_deref().unwrap_or(""), at));
                    if !retracted {
                        *hour.views.entry(actor).or_default() += 1;
                    }
                }
                6..=7 => {
                    w.originals.push(event(&id("l"), product, v1::EventType::Like, 0, at));
                    hour.likes += i64::from(!retracted);
                }
                _ => {
                    let amount = 1_000 * (1 + draw.next(40) as i64);
                    w.originals.push(event(&id("o"), product, v1::EventType::Order, amount, at));
                    if !retracted {
                        hour.orders += 1;
                        hour.order_amount += amount;
                    }
                }
            }
            if retracted {
                let back = retract(&id("r"), product, &w.originals.last().expect("an original").event_id, now);
                if draw.next(3) == 0 {
                    w.early.push(back.clone());
                }
                if draw.next(3) == 0 {
                    w.retractions.push(back.clone());
                }
                w.retractions.push(back);
            }
        }
    }
    w
}

/// The hourly rows of the database at `url`: `(product, hour start) → views, likes, orders,
/// order_amount, last_event_at`.
async fn hourly_rows(url: &str) -> BTreeMap<(i64, i64), [i64; 5]> {
    let db = Database::connect(url).await.expect("connect");
    let sql = "SELECT product_id, hour_start, views, likes, orders, order_amount, last_event_at \
               FROM product_hourly_metrics";
    let rows = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql)).await.expect("rows");
    rows.iter()
        .map(|r| {
            let int = |i| r.try_get_by_index::<i64>(i).expect("an integer");
            ((int(0), int(1)), [int(2), int(3), int(4), int(5), int(6)])
        })
        .collect()
}

/// A product's main score, views and likes decayed, and its latest event.
type Decayed = (f64, f64, f64, i64);

/// The trending board of `hours` at `t_us` as the definition gives it, written out: per
/// product, each hour's `0.1·views + 0.2·likes + 0.6·ln(1 + amount)` weighed by
/// `2^(−(T − end) / half_life)` (the hour under way ends at T) and added oldest first; views
/// and likes decayed alike, recency the seconds from the latest event to T; normalised over
/// the board and packed as main floor, views, likes, recency. Best first, equal scores by
/// descending product id.
fn reference(hours: &BTreeMap<(i64, i64), [i64; 5]>, t_us: i64) -> Vec<(i64, f64)> {
    // Per product: main, views and likes decayed, the latest event.
    let mut products: BTreeMap<i64, Decayed> = BTreeMap::new();
    for ((product, start), [views, likes, _, amount, last]) in hours {
        if *start > t_us || start + HOUR_US <= t_us - 168 * HOUR_US {
            continue;
        }
        let end = (start + HOUR_US).min(t_us);
        let w = (-((t_us - end) as f64) / HALF_LIFE_US).exp2();
        let main = 0.1 * *views as f64 + 0.2 * *likes as f64 + 0.6 * (*amount as f64).ln_1p();
        let p = products.entry(*product).or_insert((0.0, 0.0, 0.0, i64::MIN));
        p.0 += main * w;
        p.1 += *views as f64 * w;
        p.2 += *likes as f64 * w;
        p.3 = p.3.max(*last);
    }
    let column = |f: &dyn Fn(&Decayed) -> f64| products.values().map(f).collect::<Vec<f64>>();
    let (views, likes) = (column(&|p| p.1), column(&|p| p.2));
    let recency = column(&|p| (t_us - p.3) as f64 / 1e6);
    let mut board: Vec<(i64, f64)> = products
        .iter()
        .enumerate()
        .map(|(i, (product, p))| {
            let n = p.0.floor() as i64 * 1_000_000_000
                + i64::from(independent_norm(&views, views[i])) * 1_000_000
                + i64::from(independent_norm(&likes, likes[i])) * 1_000
                + (999 - i64::from(independent_norm(&recency, recency[i])));
            (*product, n as f64 / 1e9)
        })
        .collect();
    board.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    board
}

/// The served trending board (whole), the instant its version was computed at, and the
/// version; `None` while the board is empty, or when a new version came between its reads.
async fn try_served_board(app: &mut TestApp) -> Option<(Vec<(i64, f64)>, i64, u64)> {
    let trending = v1::Window::Trending as i32;
    let top = app
        .client
        .get_top_n(v1::GetTopNRequest { window: trending, limit: 1_000, ..Default::default() })
        .await
        .expect("GetTopN of the trending board")
        .into_inner();
    let first = top.products.first()?.product_id;
    let explained = app
        .client
        .explain_rank(v1::ExplainRankRequest { product_id: first, window: trending, ..Default::default() })
        .await
        .expect("ExplainRank of the trending board")
        .into_inner();
    if explained.version != top.version {
        // A live pass published between the two reads: read both again.
        return None;
    }
    let at = explained.trending_at.expect("trending_at");
    let t_us = at.seconds * 1_000_000 + i64::from(at.nanos / 1_000);
    let summed = explained.hours.iter().fold(0.0, |s, h| s + h.points);
    assert_eq!(summed.to_bits(), explained.main_score.to_bits(), "the hours add up to the main score");
    Some((top.products.iter().map(|p| (p.product_id, p.score)).collect(), t_us, top.version))
}

/// [`try_served_board`] of a board that has entries, read while no live pass publishes.
async fn served_board(app: &mut TestApp) -> (Vec<(i64, f64)>, i64, u64) {
    try_served_board(app).await.expect("a trending board with entries, one version read")
}

#[tokio::test]
async fn hourly_rows_and_the_board_are_what_the_events_say_in_either_order() {
    let now = Utc::now() - Age::minutes(1);
    let w = hour_workload(now, 0x2545_f491_4f6c_dd1d);
    let want: BTreeMap<(i64, i64), [i64; 5]> = w.hours.iter().map(|(k, h)| (*k, h.row())).collect();
    assert!(want.len() > 100, "hours of many products: {}", want.len());
    let capped = w.hours.values().filter(|h| h.views.iter().any(|(a, n)| a.is_some() && *n > 1)).count();
    assert!(capped > 10, "hours where a shopper's views are capped: {capped}");
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    for order in 0..2 {
        let mut app = TestApp::spawn(&[&profile.flag()]).await;
        if order == 0 {
            for chunk in w.originals.chunks(200) {
                app.record(chunk.to_vec()).await;
            }
            app.record(w.retractions.clone()).await;
            app.record(w.early.clone()).await;
        } else {
            app.record(w.early.clone()).await;
            for chunk in w.originals.iter().rev().cloned().collect::<Vec<_>>().chunks(37) {
                app.record(chunk.to_vec()).await;
            }
            // Redelivered: every original again.
            app.record(w.originals[..50].to_vec()).await;
            app.record(w.retractions.iter().rev().cloned().collect()).await;
        }
        let url = &app.db.as_ref().expect("a database").url;
        assert_eq!(hourly_rows(url).await, want, "arrival order {order}");
        app.recompute("").await;
        let (board, t_us, _) = served_board(&mut app).await;
        assert_eq!(board, reference(&want, t_us), "arrival order {order}: the board at its instant");
        app.stop().await;
    }
}

/// An instant of the hour under way, a little in the past, at a moment the test's recompute
/// falls in the same hour (waiting out the last seconds of an hour): the burst's views are then
/// in the hour under way, whose weight is 1.
async fn within_the_hour_under_way() -> DateTime<Utc> {
    loop {
        let t = Utc::now();
        let hour = t.duration_trunc(Age::hours(1)).expect("an hour");
        if t - hour < Age::minutes(59) {
            return (t - Age::minutes(1)).max(hour + Age::milliseconds(1));
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn a_burst_now_rises_above_a_best_seller_of_a_day_ago_and_a_bot_counts_once_an_hour() {
    let now = within_the_hour_under_way().await;
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    let mut app = TestApp::spawn(&[&profile.flag()]).await;
    // Yesterday's best seller: 400 views a day ago; the newcomer: 60 views in the hour under way.
    app.record(views("seller", 1, 400, now - Age::hours(24))).await;
    app.record(views("burst", 2, 60, now)).await;
    // A bot's 200 views count once this hour; three shoppers' views count three times.
    app.record((0..200).map(|i| view_by(&format!("bot-{i}"), 3, "bot", now)).collect()).await;
    app.record((0..3).map(|i| view_by(&format!("s-{i}"), 4, &format!("shopper-{i}"), now)).collect()).await;
    app.recompute("").await;
    let (board, _, _) = served_board(&mut app).await;
    let order: Vec<i64> = board.iter().map(|(p, _)| *p).collect();
    let place = |p: i64| order.iter().position(|q| *q == p).expect("on the board");
    assert!(place(2) < place(1), "the burst above the best seller a day ago: {board:?}");
    assert!(place(4) < place(3), "three shoppers above one bot: {board:?}");
    let weekly = v1::GetTopNRequest { window: v1::Window::Weekly as i32, limit: 10, ..Default::default() };
    let week = app.client.get_top_n(weekly).await.expect("weekly").into_inner();
    assert_eq!(week.products[0].product_id, 1, "over the week the best seller still leads");
    let explained = app
        .client
        .explain_rank(v1::ExplainRankRequest {
            product_id: 3,
            window: v1::Window::Trending as i32,
            ..Default::default()
        })
        .await
        .expect("explain")
        .into_inner();
    assert_eq!(explained.hours.len(), 1);
    assert_eq!((explained.hours[0].main_score, explained.hours[0].weight), (0.1, 1.0), "one view, the hour under way");
    app.stop().await;
}

#[tokio::test]
async fn a_live_pass_publishes_the_board_as_a_recompute_does() {
    let now = Utc::now() - Age::minutes(1);
    let w = hour_workload(now, 0x9e37_79b9_7f4a_7c15);
    let want: BTreeMap<(i64, i64), [i64; 5]> = w.hours.iter().map(|(k, h)| (*k, h.row())).collect();
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    let mut app = TestApp::spawn(&[&profile.flag(), "--live-interval=100ms"]).await;
    app.recompute("").await;
    for chunk in w.originals.chunks(300) {
        app.record(chunk.to_vec()).await;
    }
    app.record(w.retractions.clone()).await;
    app.record(w.early.clone()).await;
    // The live passes publish the board without a recompute; the last one holds every row.
    let (board, t_us, version) =
        ranking_server::test_support::eventually_some("a live pass over every row", async || {
            let (board, t_us, version) = try_served_board(&mut app).await?;
            (board == reference(&want, t_us)).then_some((board, t_us, version))
        })
        .await;
    let recomputed = app.recompute("").await;
    // Passes may publish after it (each at its own instant): any version read is one.
    let (again, later, after) = ranking_server::test_support::eventually_some("a version read whole", async || {
        try_served_board(&mut app).await
    })
    .await;
    assert!(after > version && recomputed.version > 0, "the recompute published a newer version");
    assert!(later > t_us, "at a later instant");
    assert_eq!(again, reference(&want, later), "the recompute's board at its instant");
    assert_eq!(board.len(), again.len());
    app.stop().await;
}

#[tokio::test]
async fn every_read_serves_the_trending_board_its_segments_pages_and_controls() {
    let now = Utc::now() - Age::minutes(1);
    let mut app = TestApp::spawn(&["--watch-interval=50ms"]).await;
    let segment = |p: i64| if p % 2 == 0 { "brand:even" } else { "brand:odd" };
    let entries: Vec<v1::CatalogEntry> = (1..=30)
        .map(|p| v1::CatalogEntry { product_id: p, segments: vec![segment(p).into()], ..Default::default() })
        .collect();
    app.client.update_catalog(v1::UpdateCatalogRequest { products: entries }).await.expect("catalog");
    for p in 1..=30i64 {
        // Product p viewed 3p times, an hour later for every third product.
        let at = now - Age::hours(p % 3);
        app.record(views(&format!("p{p}"), p, 3 * p as usize, at)).await;
    }
    app.recompute("").await;
    let trending = v1::Window::Trending as i32;
    let top = |limit, segment: &str, page_token: &str| v1::GetTopNRequest {
        window: trending,
        limit,
        segment: segment.into(),
        page_token: page_token.into(),
        ..Default::default()
    };
    let whole = app.client.get_top_n(top(30, "", "")).await.expect("top").into_inner();
    assert_eq!(whole.total, 30);
    let ids: Vec<i64> = whole.products.iter().map(|p| p.product_id).collect();

    // Pages of one version by token.
    let first = app.client.get_top_n(top(10, "", "")).await.expect("page 1").into_inner();
    let second = app.client.get_top_n(top(10, "", &first.next_page_token)).await.expect("page 2").into_inner();
    let paged: Vec<i64> = first.products.iter().chain(&second.products).map(|p| p.product_id).collect();
    assert_eq!(paged, ids[..20]);

    // GetRank with its neighbours and GetRanks answer from the same board.
    let fifth = ids[4];
    let rank = v1::GetRankRequest { product_id: fifth, window: trending, neighbors: 1, ..Default::default() };
    let rank = app.client.get_rank(rank).await.expect("rank").into_inner();
    assert_eq!(rank.product.expect("ranked").rank, 5);
    assert_eq!((rank.above[0].product_id, rank.below[0].product_id), (ids[3], ids[5]));
    let ranks = v1::GetRanksRequest { product_ids: vec![ids[0], ids[9]], window: trending, ..Default::default() };
    let ranks = app.client.get_ranks(ranks).await.expect("ranks").into_inner();
    assert_eq!(ranks.products.iter().map(|p| p.rank).collect::<Vec<_>>(), vec![1, 10]);

    // A segment's board: the whole board's scores, its own ranks.
    let even = app.client.get_top_n(top(30, "brand:even", "")).await.expect("segment").into_inner();
    let want: Vec<(i64, f64)> =
        whole.products.iter().filter(|p| p.product_id % 2 == 0).map(|p| (p.product_id, p.score)).collect();
    assert_eq!(even.products.iter().map(|p| (p.product_id, p.score)).collect::<Vec<_>>(), want);

    // WatchTopN starts with the board; ListMovers compares with a day that has none.
    let watch = v1::WatchTopNRequest { window: trending, limit: 5, ..Default::default() };
    let mut stream = app.client.watch_top_n(watch).await.expect("watch").into_inner();
    let state = stream.message().await.expect("a state").expect("open");
    assert_eq!(state.products.iter().map(|p| p.product_id).collect::<Vec<_>>(), ids[..5]);
    let movers = v1::ListMoversRequest { window: trending, limit: 5, ..Default::default() };
    assert!(app.client.list_movers(movers).await.expect("movers").into_inner().products.is_empty());

    // A pin on the trending board only: served there within the control poll, not on the daily board.
    let last = *ids.last().expect("a last product");
    let pin = v1::Control {
        control_id: "rising-pin".into(),
        windows: vec![trending],
        action: Some(v1::control::Action::Pin(v1::Pin { product_id: last, position: 1 })),
        ..Default::default()
    };
    app.client.put_control(v1::PutControlRequest { control: Some(pin), expected_revision: 0 }).await.expect("pin");
    ranking_server::test_support::eventually("the pin served on the trending board", async || {
        let served = app.client.get_top_n(top(1, "", "")).await.expect("top").into_inner();
        served.products[0].product_id == last && served.products[0].control_ids == ["rising-pin"]
    })
    .await;
    let daily = app.top("", 1).await;
    assert_ne!(daily.products[0].product_id, last, "the daily board is not pinned");
    let state = stream.message().await.expect("a state").expect("open");
    assert_eq!(state.products[0].product_id, last, "the watcher sees the pin");
    app.stop().await;
}
