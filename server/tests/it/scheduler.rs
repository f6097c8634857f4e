//! The scheduler step by step: midnight, replicas' tick markers and retention, driven with
//! explicit instants instead of waiting for the interval.

use crate::helpers::{TestApp, views};
use chrono::{Days, NaiveTime, Utc};

#[tokio::test]
async fn the_first_tick_after_midnight_also_recomputes_yesterday() {
    // No periodic loop (interval 0): the test drives the ticks; a scheduler slot is then
    // 100 ms of the instants the ticks are given.
    let mut app = TestApp::spawn(&[]).await;
    let today = Utc::now().date_naive();
    let yesterday = today - Days::new(1);
    let late_yesterday = yesterday.and_time(NaiveTime::from_hms_opt(23, 59, 0).expect("valid")).and_utc();
    let after_midnight = today.and_time(NaiveTime::from_hms_opt(0, 1, 0).expect("valid")).and_utc();
    app.record(views("late", 5, 3, late_yesterday)).await;

    let first = app.scheduler.tick(late_yesterday).await;
    assert_eq!(first.iter().map(|r| r.date).collect::<Vec<_>>(), vec![yesterday]);
    let second = app.scheduler.tick(after_midnight).await;
    let mut days: Vec<_> = second.iter().map(|r| r.date).collect();
    days.sort();
    assert_eq!(days, vec![yesterday, today], "yesterday gets its final recompute");
    let again = app.scheduler.tick(after_midnight).await;
    assert!(again.is_empty(), "the same slot is not worked twice: {again:?}");
    let third = app.scheduler.tick(after_midnight + chrono::Duration::seconds(1)).await;
    assert_eq!(third.iter().map(|r| r.date).collect::<Vec<_>>(), vec![today], "only once");
    assert_eq!(app.top(&yesterday.to_string(), 10).await.total, 1);
    app.stop().await;
}
