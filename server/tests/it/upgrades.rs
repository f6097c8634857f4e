//! Upgrades in place: a release starts on a schema that a newer release migrated forward (a
//! rolling upgrade runs both on one database; a rollback starts the older one on the newer
//! schema) and serves from it, and refuses, naming both, a schema of another line of releases.
//! Runs on every engine.

use chrono::Utc;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};

use crate::helpers::{TestApp, TestDb, settings, views};

/// A migration no release of this line has: what a newer release would have applied.
const NEWER: &str = "m20991231_000001_from_a_newer_release";

/// Runs one statement on the test's database, as an operator's client would.
pub(crate) async fn execute(db: &DatabaseConnection, sql: String) {
    db.execute_raw(Statement::from_string(db.get_database_backend(), sql)).await.expect("statement");
}

#[tokio::test]
async fn a_release_serves_on_a_schema_a_newer_release_migrated_and_refuses_another_line() {
    let db = TestDb::create().await;
    let mut app = TestApp::spawn_on(settings(&db.url, &[])).await;
    app.record(views("v", 7, 3, Utc::now() - chrono::Duration::seconds(5))).await;
    app.recompute("").await;
    app.stop().await;

    // A newer release migrated the schema forward: its migration is applied, and its table.
    let admin = Database::connect(&db.url).await.expect("connect");
    execute(&admin, format!("INSERT INTO seaql_migrations (version, applied_at) VALUES ('{NEWER}', 0)")).await;
    execute(&admin, "CREATE TABLE newer_release_rows (id BIGINT PRIMARY KEY)".to_string()).await;
    let mut app = TestApp::spawn_on(settings(&db.url, &[])).await;
    let top = app.top("", 10).await;
    assert_eq!(top.products.first().map(|p| p.product_id), Some(7), "served from the rows in SQL");
    let recorded = app.record(views("w", 8, 5, Utc::now() - chrono::Duration::seconds(5))).await;
    assert_eq!(recorded.accepted, 5, "writes go on");
    app.recompute("").await;
    let request = v1::GetTopNRequest { limit: 1, ..Default::default() };
    let first = app.client.get_top_n(request).await.expect("GetTopN").into_inner().products[0].product_id;
    assert_eq!(first, 8);
    app.stop().await;
    let applied = admin
        .query_one_raw(Statement::from_string(
            admin.get_database_backend(),
            "SELECT COUNT(*) FROM seaql_migrations".to_string(),
        ))
        .await
        .expect("count")
        .expect("row")
        .try_get_by_index::<i64>(0)
        .expect("count");
    assert_eq!(applied as usize, ranking_migrations_count() + 1, "nothing applied or rolled back on it");

    // Another line: a migration unknown here, and one of this release's missing.
    execute(&admin, "DELETE FROM seaql_migrations WHERE version = 'm20261205_000012_hourly_metrics'".to_string()).await;
    let refused = ranking_server::startup::Application::build(settings(&db.url, &[])).await;
    let error = format!("{:#}", refused.err().expect("refused at start-up"));
    assert!(
        error.contains(NEWER) && error.contains("m20261205_000012_hourly_metrics") && error.contains("another line"),
        "{error}"
    );
    drop(admin);
    db.drop_db().await;
}

/// The migrations of this release.
fn ranking_migrations_count() -> usize {
    use ranking_migrations::MigratorTrait;
    ranking_migrations::Migrator::migrations().len()
}
