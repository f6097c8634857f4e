//! `ranking-migrate`: applies pending migrations to `DATABASE_URL` (`make migrate`).

use ranking_migrations::{Migrator, MigratorTrait};
use sea_orm_migration::sea_orm::Database;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "sqlite://ranking.db?mode=rwc".into());
    let db = Database::connect(&url).await?;
    Migrator::up(&db, None).await?;
    println!("migrations applied to {}", url.split('@').next_back().unwrap_or(&url));
    Ok(())
}
