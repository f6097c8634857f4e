//! `rankctl` against a running server: record, recompute, top and rank, as tables and JSON.

use std::path::PathBuf;
use std::process::Command;

/// The workspace's `rankctl` binary, next to this test's own executable (`make test` builds
/// every target before running the tests).
fn rankctl() -> PathBuf {
    let exe = std::env::current_exe().expect("test path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("rankctl");
    assert!(bin.exists(), "{} is missing: run `cargo build --workspace` first", bin.display());
    bin
}

pub(crate) fn run(endpoint: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(rankctl()).arg("--endpoint").arg(endpoint).args(args).output().expect("rankctl runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rankctl_records_recomputes_and_reads() {
    let app = crate::helpers::TestApp::spawn(&[]).await;
    let endpoint = format!("http://{}", app.addr);
    let ep = endpoint.clone();
    let results = tokio::task::spawn_blocking(move || {
        let first = run(&ep, &["record", "order", "42", "--amount", "10000", "--id", "cli-1"]);
        let again = run(&ep, &["--json", "record", "order", "42", "--amount", "10000", "--id", "cli-1"]);
        let recompute = run(&ep, &["recompute"]);
        let top = run(&ep, &["top", "--json"]);
        let table = run(&ep, &["rank", "42"]);
        let missing = run(&ep, &["rank", "43"]);
        let invalid = run(&ep, &["record", "view", "0"]);
        let refused = run(&ep, &["record", "retract", "7", "--retracts", "cli-1"]);
        let retract = run(&ep, &["record", "retract", "42", "--retracts", "cli-1", "--id", "cli-r"]);
        run(&ep, &["recompute"]);
        let explained = (run(&ep, &["explain", "42"]), run(&ep, &["--json", "explain", "42"]));
        (first, again, recompute, top, table, missing, invalid, retract, refused, explained)
    })
    .await
    .expect("blocking");
    let (first, again, recompute, top, table, missing, invalid, retract, refused, (explained, explained_json)) =
        results;
    assert!(explained.1.contains("retracted: 0 views, 0 likes, 1 orders (10000)"), "{}", explained.1);
    assert!(
        explained_json.1.contains(r#""retracted":{"views":0,"likes":0,"orders":1,"order_amount":10000}"#),
        "{}",
        explained_json.1
    );
    assert!(retract.0 && retract.1.starts_with("RECORD_OUTCOME_ACCEPTED cli-r"), "{}", retract.1);
    assert!(!refused.0 && refused.1.contains("event.product_id: is 7"), "{}", refused.1);
    assert!(first.0 && first.1.starts_with("RECORD_OUTCOME_ACCEPTED cli-1"), "{}", first.1);
    assert!(again.0 && again.1.contains(r#""outcome":"RECORD_OUTCOME_DUPLICATE""#), "{}", again.1);
    assert!(recompute.0 && recompute.1.contains("1 products"), "{}", recompute.1);
    assert!(top.0 && top.1.contains(r#""product_id":42"#) && top.1.contains(r#""main_floor":5"#), "{}", top.1);
    assert!(table.0 && table.1.contains("rank 1 of 1"), "{}", table.1);
    assert!(!missing.0 && missing.1.contains("NotFound"), "{}", missing.1);
    assert!(!invalid.0 && invalid.1.contains("event.product_id"), "{}", invalid.1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rankctl_answers_the_shop_page_questions() {
    let mut app = crate::helpers::TestApp::spawn(&[]).await;
    let at = chrono::Utc::now() - chrono::Duration::seconds(5);
    // Products 1..=5 with p views each: product p is ranked 6 - p.
    let events = (1..=5).flat_map(|p| crate::helpers::views(&format!("q{p}"), p, p as usize, at)).collect();
    app.record(events).await;
    app.recompute("").await;
    let ep = format!("http://{}", app.addr);
    let out = tokio::task::spawn_blocking(move || {
        [
            run(&ep, &["rank", "3", "--neighbors", "1"]),
            run(&ep, &["--json", "rank", "3", "--neighbors", "1"]),
            run(&ep, &["ranks", "5", "1", "99"]),
            run(&ep, &["--json", "ranks", "5", "1", "99"]),
            run(&ep, &["movers"]),
            run(&ep, &["--json", "movers", "--falling", "--within-top", "3"]),
            run(&ep, &["explain", "3"]),
            run(&ep, &["--json", "explain", "3"]),
        ]
    })
    .await
    .expect("blocking");
    assert!(out.iter().all(|(ok, _)| *ok), "{out:#?}");
    let [rank, rank_json, ranks, ranks_json, movers, movers_json, explain, explain_json] = out.map(|(_, text)| text);
    assert!(rank.contains("rank 3 of 5") && rank.lines().count() == 5, "{rank}");
    assert!(rank_json.contains(r#""above":[{"rank":2,"product_id":4"#), "{rank_json}");
    assert!(ranks.contains("2 of 5 ranked") && ranks.contains("not ranked: 99"), "{ranks}");
    assert!(ranks_json.contains(r#""missing":[99]"#), "{ranks_json}");
    assert!(movers.contains("0 movers (rising)"), "{movers}");
    assert!(movers_json.contains(r#""products":[]"#), "{movers_json}");
    assert!(
        explain.contains("main score") && explain.contains("recency") && explain.contains("rank 2 above"),
        "{explain}"
    );
    assert!(explain_json.contains(r#""views":3,"#) && explain_json.contains(r#""stale":false"#), "{explain_json}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rankctl_watch_prints_each_state_of_the_top() {
    let mut app = crate::helpers::TestApp::spawn(&["--watch-interval=50ms"]).await;
    let at = chrono::Utc::now() - chrono::Duration::seconds(5);
    app.record(crate::helpers::views("w", 5, 3, at)).await;
    app.recompute("").await;
    let mut child = std::process::Command::new(rankctl())
        .args(["--endpoint", &format!("http://{}", app.addr), "--json", "watch", "--limit", "3"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("rankctl runs");
    let stdout = child.stdout.take().expect("stdout");
    let first = crate::helpers::process::wait_for_line(stdout, r#""product_id":5"#);
    child.kill().ok();
    child.wait().ok();
    let first = first.expect("a state of the top");
    assert!(first.contains(r#""total":1"#), "{first}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rankctl_records_custom_signals_and_shows_a_profiles_axes() {
    let path = std::env::temp_dir().join(format!("rankctl-profile-{:016x}.toml", crate::helpers::rand_u64()));
    let profile = "carry_over = 0.1\ncarry_days = 7\n[signals.cart_adds]\nkind = \"count\"\n\
                   [[main]]\nsignal = \"cart_adds\"\nweight = 0.5\ntransform = \"log1p\"\n[[main]]\nsignal = \"views\"\nweight = 0.1\n\
                   [[axes]]\nsignal = \"cart_adds\"\ndigits = 2\n[[axes]]\nsignal = \"recency\"\ndigits = 4\n";
    std::fs::write(&path, profile).expect("profile");
    let app = crate::helpers::TestApp::spawn(&[&format!("--profile={}", path.display())]).await;
    let ep = format!("http://{}", app.addr);
    let (record, unknown, top, explain, explain_json) = tokio::task::spawn_blocking(move || {
        let record = run(&ep, &["record", "signal", "5", "--signal", "cart_adds"]);
        let unknown = run(&ep, &["record", "signal", "5", "--signal", "wishlist"]);
        run(&ep, &["record", "view", "6"]);
        run(&ep, &["recompute"]);
        (record, unknown, run(&ep, &["top"]), run(&ep, &["explain", "5"]), run(&ep, &["--json", "explain", "5"]))
    })
    .await
    .expect("blocking");
    let _ = std::fs::remove_file(&path);
    assert!(record.0 && record.1.starts_with("RECORD_OUTCOME_ACCEPTED"), "{}", record.1);
    assert!(!unknown.0 && unknown.1.contains("event.signal: unknown \"wishlist\""), "{}", unknown.1);
    assert!(top.0 && top.1.lines().any(|h| h.ends_with("MAIN  AXES")), "{}", top.1);
    assert!(explain.0 && explain.1.lines().any(|l| l.starts_with("cart_adds ")), "{}", explain.1);
    assert!(explain.1.lines().any(|l| l.starts_with("recency ")), "{}", explain.1);
    assert!(explain_json.1.contains(r#""signals":[{"signal":"cart_adds","value":1.0,"#), "{}", explain_json.1);
    app.stop().await;
}

/// Under a "distinct viewers" profile: `record view --actor` and `explain`'s cap figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rankctl_explains_what_the_caps_kept_from_counting() {
    let profile = crate::helpers::ProfileFile::new(crate::caps::DISTINCT_VIEWERS);
    let app = crate::helpers::TestApp::spawn(&[&profile.flag()]).await;
    let ep = format!("http://{}", app.addr);
    let (explained, explained_json) = tokio::task::spawn_blocking(move || {
        for i in 0..3 {
            let id = format!("bot-{i}");
            assert!(run(&ep, &["record", "view", "5", "--actor", "bot", "--id", &id]).0);
        }
        assert!(run(&ep, &["record", "view", "5", "--actor", "shopper"]).0);
        run(&ep, &["recompute"]);
        (run(&ep, &["explain", "5"]), run(&ep, &["--json", "explain", "5"]))
    })
    .await
    .expect("blocking");
    assert!(
        explained.1.contains("views: 4 events, 2 counted (at most 1 per shopper), 2 over the cap"),
        "{}",
        explained.1
    );
    assert!(
        explained_json
            .1
            .contains(r#"{"signal":"views","value":2.0,"points":0.2,"per_actor":1,"events":4,"over_cap":2}"#),
        "{}",
        explained_json.1
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rankctl_puts_lists_previews_and_deletes_controls() {
    let mut app = crate::helpers::TestApp::spawn(&[]).await;
    let at = chrono::Utc::now() - chrono::Duration::seconds(30);
    let events = (1..=3).flat_map(|p| crate::helpers::views(&format!("p{p}"), p, p as usize, at)).collect();
    app.record(events).await;
    app.recompute("").await;
    let ep = format!("http://{}", app.addr);
    let (put, listed, preview, delete, wrong) = tokio::task::spawn_blocking(move || {
        let put = run(&ep, &["controls", "put", "campaign", "--pin", "1@1", "--note", "spring"]);
        let listed = run(&ep, &["--json", "controls", "list", "--active"]);
        let preview = run(&ep, &["--json", "controls", "preview", "--without", "campaign"]);
        let delete = run(&ep, &["controls", "delete", "campaign"]);
        let wrong = run(&ep, &["controls", "put", "bad", "--pin", "1@0"]);
        (put, listed, preview, delete, wrong)
    })
    .await
    .expect("rankctl runs");
    assert!(put.0 && put.1.starts_with("stored campaign at revision "), "{}", put.1);
    assert!(listed.0, "{}", listed.1);
    assert!(listed.1.contains(r#""control_id":"campaign","kind":"pin","action":"1@1""#), "{}", listed.1);
    assert!(listed.1.contains(r#""note":"spring""#), "{}", listed.1);
    // Without the pin, the organic order: 3, 2, 1.
    assert!(preview.0, "{}", preview.1);
    let order: Vec<&str> =
        preview.1.match_indices(r#""product_id":"#).map(|(i, _)| &preview.1[i + 13..i + 14]).collect();
    assert_eq!(order, ["3", "2", "1"], "{}", preview.1);
    assert_eq!(delete, (true, "deleted campaign\n".to_string()));
    assert!(!wrong.0 && wrong.1.contains("control.pin.position"), "{}", wrong.1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rankctl_history_shows_an_ended_days_rank() {
    let mut app = crate::helpers::TestApp::spawn(&[]).await;
    let yesterday = chrono::Utc::now().date_naive() - chrono::Days::new(1);
    let noon = yesterday.and_hms_opt(12, 0, 0).expect("noon").and_utc();
    app.record(vec![
        crate::helpers::event("h-1", 7, ranking_client::v1::EventType::Order, 5_000, noon),
        crate::helpers::event("h-2", 8, ranking_client::v1::EventType::View, 0, noon),
    ])
    .await;
    app.recompute(&yesterday.to_string()).await;
    let endpoint = format!("http://{}", app.addr);
    let day = yesterday.to_string();
    let (json, table, refused) = tokio::task::spawn_blocking(move || {
        let json = run(&endpoint, &["--json", "history", "7", "--from", &day, "--to", &day]);
        let table = run(&endpoint, &["history", "8", "--from", &day, "--to", &day]);
        let refused = run(&endpoint, &["history", "7", "--from", "soon"]);
        (json, table, refused)
    })
    .await
    .expect("rankctl");
    assert!(json.0, "{}", json.1);
    assert!(json.1.starts_with(&format!(r#"{{"best_rank":1,"best_rank_date":"{yesterday}","#)), "{}", json.1);
    assert!(json.1.contains(&format!(r#"{{"date":"{yesterday}","rank":1,"organic_rank":1,"#)), "{}", json.1);
    assert!(table.0 && table.1.contains("best rank 2"), "{}", table.1);
    assert!(!refused.0 && refused.1.contains("InvalidArgument") && refused.1.contains("from:"), "{}", refused.1);
    app.stop().await;
}

/// Every command that selects a board names it with `--window` (or a board's first part), the
/// same four names for each; the older flags stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rankctl_names_every_window_the_server_serves() {
    let mut app = crate::helpers::TestApp::spawn(&[]).await;
    let at = chrono::Utc::now() - chrono::Duration::seconds(30);
    let events = (1..=3).flat_map(|p| crate::helpers::views(&format!("w{p}"), p, p as usize, at)).collect();
    app.record(events).await;
    app.recompute("").await;
    let ep = format!("http://{}", app.addr);
    let ran = tokio::task::spawn_blocking(move || {
        [
            run(&ep, &["top", "--window", "trending"]),
            run(&ep, &["top", "--window", "hourly"]),
            run(&ep, &["compare", "daily", "trending"]),
            run(&ep, &["controls", "put", "rising", "--pin", "1@1", "--window", "trending"]),
            run(&ep, &["--json", "controls", "list"]),
            run(&ep, &["--json", "controls", "preview", "--window", "trending"]),
            run(&ep, &["history", "1", "--window", "weekly"]),
            run(&ep, &["history", "1", "--weekly"]),
            run(&ep, &["history", "1", "--window", "trending"]),
            run(&ep, &["top", "--window", "monthly"]),
        ]
    })
    .await
    .expect("rankctl runs");
    let [trending, hourly, compare, put, listed, preview, weekly, weekly_flag, no_history, unknown] = ran;
    for (what, (ok, out)) in [("top trending", &trending), ("top hourly", &hourly), ("compare", &compare)] {
        assert!(ok, "{what}: {out}");
    }
    assert!(put.0 && listed.0, "{} {}", put.1, listed.1);
    assert!(listed.1.contains(r#""windows":["WINDOW_TRENDING"]"#), "{}", listed.1);
    // The pin acts on the trending board: product 1 first there.
    assert!(preview.0 && preview.1.contains(r#""product_id":1"#), "{}", preview.1);
    let first = preview.1.find(r#""product_id":"#).map(|i| &preview.1[i + 13..i + 14]);
    assert_eq!(first, Some("1"), "{}", preview.1);
    assert!(weekly.0 && weekly_flag.0 && weekly.1 == weekly_flag.1, "{} / {}", weekly.1, weekly_flag.1);
    // The server keeps no trending history, and says which field.
    assert!(!no_history.0 && no_history.1.contains("window"), "{}", no_history.1);
    assert!(!unknown.0 && unknown.1.contains("not a window"), "{}", unknown.1);
    app.stop().await;
}

/// Every `--json` output is JSON, whatever the strings it echoes hold: an event id with a
/// quote and a backslash, a control's note and a title with control characters, quotes,
/// backslashes and non-ASCII text, and every read command; its keys are the ones scripts read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_json_output_parses_whatever_its_strings_hold() {
    let mut app = crate::helpers::TestApp::spawn(&[]).await;
    let at = chrono::Utc::now() - chrono::Duration::seconds(30);
    let events = (1..=3).flat_map(|p| crate::helpers::views(&format!("p{p}"), p, p as usize, at)).collect();
    app.record(events).await;
    app.recompute("").await;
    let ep = format!("http://{}", app.addr);
    // An event id is printable ASCII and a control id a-z 0-9 _ . - (the server refuses others);
    // a note and a title are any text.
    let (id, control, note) = (r#"a"b\c'{x}"#, "pin.1", "line\none\ttab \u{1} \"quoted\" \\ ünï-😀");
    let outputs = tokio::task::spawn_blocking(move || {
        let pin = control.to_string();
        [
            ("record", run(&ep, &["--json", "record", "view", "2", "--id", id])),
            ("controls put", run(&ep, &["--json", "controls", "put", &pin, "--pin", "1@1", "--note", note])),
            ("controls list", run(&ep, &["--json", "controls", "list"])),
            ("controls preview", run(&ep, &["--json", "controls", "preview", "--window", "trending"])),
            ("recompute", run(&ep, &["--json", "recompute"])),
            ("top", run(&ep, &["--json", "top", "--window", "trending"])),
            ("rank", run(&ep, &["--json", "rank", "2", "--neighbors", "1"])),
            ("ranks", run(&ep, &["--json", "ranks", "1", "2", "99"])),
            ("movers", run(&ep, &["--json", "movers"])),
            ("explain", run(&ep, &["--json", "explain", "2"])),
            ("history", run(&ep, &["--json", "history", "2"])),
            ("compare", run(&ep, &["--json", "compare", "daily", "trending"])),
            ("catalog set", run(&ep, &["--json", "catalog", "set", "3", "--title", note])),
            ("controls delete", run(&ep, &["--json", "controls", "delete", &pin])),
        ]
    })
    .await
    .expect("rankctl runs");
    let mut parsed = std::collections::BTreeMap::new();
    for (command, (ok, text)) in outputs {
        assert!(ok, "{command}: {text}");
        let value: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{command}: not JSON ({e}): {text}"));
        parsed.insert(command, value);
    }
    assert_eq!(parsed["record"]["event_id"], id);
    assert_eq!(parsed["record"]["outcome"], "RECORD_OUTCOME_ACCEPTED");
    assert_eq!(
        (&parsed["controls put"]["control_id"], &parsed["controls put"]["note"]),
        (&control.into(), &note.into())
    );
    let listed = parsed["controls list"].as_array().expect("a list");
    assert!(listed.iter().any(|c| c["control_id"] == control && c["note"] == note), "{listed:?}");
    assert_eq!(parsed["controls preview"]["products"][0]["product_id"], 1, "the pin served on the trending board");
    assert_eq!(parsed["top"]["products"][0]["control_ids"][0], control);
    assert_eq!(parsed["rank"]["product"]["product_id"], 2);
    assert_eq!(parsed["ranks"]["missing"], serde_json::json!([99]));
    assert!(parsed["explain"]["views"].as_u64().is_some_and(|v| v >= 3), "{}", parsed["explain"]);
    assert!(parsed["history"]["days"].is_array());
    assert!(parsed["compare"]["rbo_ext"].is_number());
    assert_eq!(parsed["catalog set"]["updated"], 1);
    assert_eq!(parsed["controls delete"]["deleted"], true);
    app.stop().await;
}
