//! Segment rankings through the client: the full ranking restricted to a
//! segment's members, same scores, ranks counted within the segment; membership changes at the
//! next recompute; an empty segment reads as an empty ranking; hidden products leave them.

use chrono::{Duration, Utc};
use ranking_client::tonic::Code;
use ranking_client::v1;
use redis::AsyncCommands;

use crate::helpers::{TestApp, views};

fn entry(product_id: i64, segments: &[&str]) -> v1::CatalogEntry {
    v1::CatalogEntry {
        product_id,
        segments: segments.iter().map(|s| s.to_string()).collect(),
        hidden: false,
        title: String::new(),
    }
}

fn top(window: v1::Window, segment: &str) -> v1::GetTopNRequest {
    v1::GetTopNRequest { window: window.into(), segment: segment.into(), limit: 100, ..Default::default() }
}

async fn board(app: &mut TestApp, window: v1::Window, segment: &str) -> Vec<(i64, u64, f64)> {
    let page = app.client.get_top_n(top(window, segment)).await.expect("GetTopN").into_inner();
    assert_eq!(page.total as usize, page.products.len());
    page.products.iter().map(|p| (p.product_id, p.rank, p.score)).collect()
}

/// The full ranking's entries of `members`, renumbered: what a segment must serve.
fn restricted(full: &[(i64, u64, f64)], members: &[i64]) -> Vec<(i64, u64, f64)> {
    full.iter()
        .filter(|(id, ..)| members.contains(id))
        .enumerate()
        .map(|(i, (id, _, score))| (*id, i as u64 + 1, *score))
        .collect()
}

async fn catalog(app: &mut TestApp, products: Vec<v1::CatalogEntry>) {
    let request = v1::UpdateCatalogRequest { products };
    app.client.update_catalog(request).await.expect("UpdateCatalog");
}

#[tokio::test]
async fn segment_rankings_are_the_full_ranking_restricted_to_their_members() {
    let mut app = TestApp::spawn(&[]).await;
    let at = Utc::now() - Duration::seconds(5);
    let events = (1..=6).flat_map(|p| views(&format!("p{p}"), p, p as usize * 2, at)).collect();
    app.record(events).await;
    catalog(
        &mut app,
        vec![
            entry(1, &["odd"]),
            entry(3, &["odd"]),
            entry(5, &["odd"]),
            entry(2, &["even"]),
            entry(4, &["even"]),
            entry(6, &["even", "top"]),
        ],
    )
    .await;
    app.recompute("").await;
    for window in [v1::Window::Daily, v1::Window::Weekly] {
        let full = board(&mut app, window, "").await;
        assert_eq!(board(&mut app, window, "odd").await, restricted(&full, &[1, 3, 5]), "{window:?}");
        assert_eq!(board(&mut app, window, "even").await, restricted(&full, &[2, 4, 6]), "{window:?}");
        assert_eq!(board(&mut app, window, "top").await, restricted(&full, &[6]), "{window:?}");
    }

    // Every read takes the segment: ranks, neighbours and page tokens stay within it.
    let rank = v1::GetRankRequest { product_id: 3, segment: "odd".into(), neighbors: 1, ..Default::default() };
    let rank = app.client.get_rank(rank).await.expect("GetRank").into_inner();
    let product = rank.product.expect("entry");
    assert_eq!((product.rank, rank.total), (2, 3));
    assert_eq!((rank.above[0].product_id, rank.below[0].product_id), (5, 1));
    let ranks = v1::GetRanksRequest { product_ids: vec![1, 2], segment: "odd".into(), ..Default::default() };
    let ranks = app.client.get_ranks(ranks).await.expect("GetRanks").into_inner();
    assert_eq!((ranks.products[0].rank, ranks.missing.clone()), (3, vec![2]));
    let first = app.client.get_top_n(v1::GetTopNRequest { limit: 1, ..top(v1::Window::Daily, "odd") }).await;
    let first = first.expect("page 1").into_inner();
    let next = v1::GetTopNRequest { page_token: first.next_page_token, ..Default::default() };
    let second = app.client.get_top_n(next).await.expect("page 2").into_inner();
    assert_eq!((second.products[0].product_id, second.products[0].rank, second.total), (3, 2, 3));
    let explain = v1::ExplainRankRequest { product_id: 3, segment: "odd".into(), ..Default::default() };
    let explain = app.client.explain_rank(explain).await.expect("explain").into_inner();
    assert_eq!((explain.product.map(|p| p.rank), explain.above.map(|p| p.product_id)), (Some(2), Some(5)));

    // A segment nobody belongs to is an empty ranking; a malformed one, or an hourly
    // segment, is refused.
    assert_eq!(board(&mut app, v1::Window::Daily, "category:none").await, vec![]);
    let missing = v1::GetRankRequest { product_id: 1, segment: "category:none".into(), ..Default::default() };
    assert_eq!(app.client.get_rank(missing).await.expect_err("not ranked").code(), Code::NotFound);
    for (request, field) in [(top(v1::Window::Daily, "Odd"), "segment:"), (top(v1::Window::Hourly, "odd"), "segment:")]
    {
        let e = app.client.get_top_n(request).await.expect_err("refused");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().starts_with(field), "{}", e.message());
    }

    // Membership changes at the next recompute: 5 moves to "even", 6 leaves "top" (now empty).
    catalog(&mut app, vec![entry(5, &["even"]), entry(6, &["even"])]).await;
    assert_eq!(board(&mut app, v1::Window::Daily, "odd").await.len(), 3, "until the next recompute");
    app.recompute("").await;
    let full = board(&mut app, v1::Window::Daily, "").await;
    assert_eq!(board(&mut app, v1::Window::Daily, "odd").await, restricted(&full, &[1, 3]));
    assert_eq!(board(&mut app, v1::Window::Daily, "even").await, restricted(&full, &[2, 4, 5, 6]));
    assert_eq!(board(&mut app, v1::Window::Daily, "top").await, vec![], "a segment left empty reads empty");

    // Hiding takes a product out of its segments' rankings at once.
    catalog(
        &mut app,
        vec![v1::CatalogEntry { product_id: 3, segments: vec!["odd".into()], hidden: true, title: String::new() }],
    )
    .await;
    assert_eq!(board(&mut app, v1::Window::Daily, "odd").await.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1]);
    assert_eq!(board(&mut app, v1::Window::Weekly, "odd").await.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1]);
    app.stop().await;
}

/// Each replica holds the segment rankings of today in memory like the whole ones: after the
/// other replica's recompute it serves them, and keeps serving them from its copy when their
/// keys vanish from Redis.
#[tokio::test]
async fn replicas_hold_segment_rankings_in_memory() {
    use redis::AsyncCommands;
    let db = crate::helpers::TestDb::create().await;
    let prefix = format!("t{:x}", crate::helpers::rand_u64());
    let mut a = TestApp::spawn_on(crate::redis_store::redis_settings(&db.url, &prefix, &[])).await;
    let mut b = TestApp::spawn_on(crate::redis_store::redis_settings(&db.url, &prefix, &[])).await;
    let at = Utc::now() - Duration::seconds(5);
    a.record((1..=4).flat_map(|p| views(&format!("p{p}"), p, p as usize, at)).collect()).await;
    catalog(&mut a, vec![entry(1, &["brand:acme"]), entry(3, &["brand:acme"])]).await;
    let loads = |m: &str| crate::helpers::metric_value(m, "ranking_snapshot_loads_total");
    let before = loads(&b.scrape_metrics().await);
    a.recompute("").await;
    let published = a.client.get_top_n(top(v1::Window::Daily, "brand:acme")).await.expect("a").into_inner();
    // b loads four new versions: daily, weekly, and the segment's daily and weekly.
    ranking_server::test_support::eventually("replica b loads the segment rankings", async || {
        loads(&b.scrape_metrics().await) >= before + 4.0
    })
    .await;
    let mut conn = crate::redis_store::redis().await;
    let keys: Vec<String> = conn.keys(format!("{prefix}:{{daily:*}}:dseg:*")).await.expect("KEYS");
    assert!(!keys.is_empty());
    let _: () = conn.del(keys).await.expect("DEL");
    let held = b.client.get_top_n(top(v1::Window::Daily, "brand:acme")).await.expect("held").into_inner();
    assert_eq!((held.version, held.products), (published.version, published.products));
    a.stop().await;
    b.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn segments_beyond_the_limit_get_no_ranking_and_are_counted() {
    let mut app = TestApp::spawn(&["--max-segments=1"]).await;
    app.record(
        (1..=2).flat_map(|p| views(&format!("p{p}"), p, p as usize, Utc::now() - Duration::seconds(5))).collect(),
    )
    .await;
    catalog(&mut app, vec![entry(1, &["first"]), entry(2, &["second"])]).await;
    app.recompute("").await;
    assert_eq!(board(&mut app, v1::Window::Daily, "first").await.len(), 1);
    assert_eq!(board(&mut app, v1::Window::Daily, "second").await, vec![]);
    let metrics = app.scrape_metrics().await;
    assert_eq!(crate::helpers::metric_value(&metrics, "ranking_segment_memberships_dropped "), 1.0);
    app.stop().await;
}

/// Every version is kept in Redis as its packed copy and product index (the daily ranking's
/// sorted set is not read by the service): a replica that holds no copy
/// (`--snapshot-max-entries=0`) answers every read of them from
/// Redis, and its answers equal those of the replica serving its in-memory copy: pages and
/// totals, ranks, tied ranks (many products tie), neighbours, many ranks at once with
/// non-members, page tokens of either; also for versions without a product index (published
/// before indexes existed), whose products are found by a byte search.
#[tokio::test]
#[ignore = "needs Redis (the in-process store keeps no packed copies): make test's Redis passes"]
async fn packed_reads_from_redis_equal_reads_from_the_copy() {
    crate::helpers::test_redis().expect("Redis (RANKING_TEST_REDIS)");
    let db = crate::helpers::TestDb::create().await;
    let prefix = format!("t{:x}", crate::helpers::rand_u64());
    let mut held = TestApp::spawn_on(crate::redis_store::redis_settings(&db.url, &prefix, &[])).await;
    let mut direct =
        TestApp::spawn_on(crate::redis_store::redis_settings(&db.url, &prefix, &["--snapshot-max-entries=0"])).await;
    let at = Utc::now() - Duration::seconds(5);
    // Views 1..=5 at one instant: every eighth product ties with seven others. The large ids
    // differ from small ones (and from each other) in their high 32 bits only.
    let products = || (1..=40).chain(LARGE_IDS);
    held.record(products().flat_map(|p| views(&format!("p{p}"), p, (p % 5 + 1) as usize, at)).collect()).await;
    catalog(&mut held, products().map(|p| entry(p, if p % 2 == 0 { &["even", "all"] } else { &["all"] })).collect())
        .await;
    held.recompute("").await;
    let mut ranks_of = std::collections::BTreeMap::new();
    for window in [v1::Window::Daily, v1::Window::Weekly] {
        for segment in ["", "even", "all"] {
            let mut pages = Vec::new();
            for app in [&mut held, &mut direct] {
                let mut walked = Vec::new();
                let mut request = v1::GetTopNRequest { limit: 7, ..top(window, segment) };
                loop {
                    let page = app.client.get_top_n(request.clone()).await.expect("GetTopN").into_inner();
                    walked.extend(page.products.iter().map(|p| (p.product_id, p.rank, p.tied_rank, p.score.to_bits())));
                    walked.push((-1, page.total, 0, page.version));
                    if page.next_page_token.is_empty() {
                        break;
                    }
                    request = v1::GetTopNRequest { page_token: page.next_page_token, ..Default::default() };
                }
                pages.push(walked);
            }
            assert_eq!(pages[0], pages[1], "{window:?} {segment}: pages");
            assert!(pages[0].len() > 20);
            let ranks = ranks_answered(&mut held, &mut direct, window, segment).await;
            assert_eq!(ranks[0], ranks[1], "{window:?} {segment}: ranks");
            assert!(ranks[0][1].contains("tied_rank"), "a ranked product");
            ranks_of.insert((window as i32, segment), ranks.into_iter().next().expect("two replicas"));
        }
    }
    // Without product indexes, the same answers.
    let mut conn = crate::redis_store::redis().await;
    let indexes: Vec<String> = conn.keys(format!("{prefix}:*:index")).await.expect("KEYS");
    assert!(indexes.len() >= 6, "every version has an index: {indexes:?}");
    for index in indexes {
        let _: () = conn.del(index).await.expect("DEL");
    }
    for ((window, segment), expected) in ranks_of {
        let window = v1::Window::try_from(window).expect("window");
        let ranks = ranks_answered(&mut held, &mut direct, window, segment).await;
        assert_eq!(ranks[1], expected, "{window:?} {segment}: ranks without an index");
    }
    held.stop().await;
    direct.stop().await;
    db.drop_db().await;
}

/// Product ids above 2^32 whose low 32 bits are those of small ones.
const LARGE_IDS: [i64; 2] = [(1 << 32) + 2, (3 << 40) + 2];

/// GetRank with neighbours of a few products (members, non-members, ties) and GetRanks of all
/// products and one more, as each of the replicas answers them.
async fn ranks_answered(
    held: &mut TestApp,
    direct: &mut TestApp,
    window: v1::Window,
    segment: &str,
) -> Vec<Vec<String>> {
    let ids: Vec<i64> = (1..=41).chain(LARGE_IDS).chain([(2 << 32) + 2]).collect();
    let mut ranks = Vec::new();
    for app in [held, direct] {
        let mut answers = Vec::new();
        for product_id in [2, 8, 16, 33, 40, 41, LARGE_IDS[0], LARGE_IDS[1], (2 << 32) + 2] {
            let request = v1::GetRankRequest {
                product_id,
                window: window.into(),
                segment: segment.into(),
                neighbors: 2,
                ..Default::default()
            };
            answers.push(match app.client.get_rank(request).await {
                Ok(r) => format!("{:?}", r.into_inner()),
                Err(e) => format!("{:?}", e.code()),
            });
        }
        let many = v1::GetRanksRequest {
            product_ids: ids.clone(),
            window: window.into(),
            segment: segment.into(),
            ..Default::default()
        };
        answers.push(format!("{:?}", app.client.get_ranks(many).await.expect("GetRanks").into_inner()));
        ranks.push(answers);
    }
    ranks
}
