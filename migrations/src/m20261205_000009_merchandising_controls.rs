//! Merchandising controls and product titles:
//! - `merchandising_controls`: one row per stored control. The board it acts on (`segment`
//!   and `profile`, empty for all; `windows`, a bit set, 0 for all), its schedule in Unix
//!   microseconds (`active_until_us` NULL: until deleted), its kind (1 pin, 2 boost, 3 exclude:
//!   what the bounds of a put read, without the action) and its action as JSON (`action`: up
//!   to 10,000 product ids, so `MEDIUMTEXT` on MySQL, whose `TEXT` stops at 64 KB), its note,
//!   and the revision and time of its last put.
//! - `control_revision`: one row, the revision of the last change of any control. Every put
//!   and delete raises it inside its own transaction, so revisions only grow (also past a
//!   deleted control's) and changes of controls take turns; a replica that sees it move knows
//!   the controls changed.
//! - `product_catalog.title`: the product's name as people know it (at most 200 characters,
//!   empty when not given).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000009_merchandising_controls"
    }
}

#[derive(DeriveIden)]
enum MerchandisingControls {
    Table,
    ControlId,
    Segment,
    Profile,
    Windows,
    ActiveFromUs,
    ActiveUntilUs,
    Kind,
    Action,
    Note,
    Revision,
    UpdatedAtUs,
}

#[derive(DeriveIden)]
enum ControlRevision {
    Table,
    Id,
    Revision,
}

#[derive(DeriveIden)]
enum ProductCatalog {
    Table,
    Title,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let mut action = ColumnDef::new(MerchandisingControls::Action);
        match manager.get_database_backend() {
            DbBackend::MySql => action.custom(Alias::new("MEDIUMTEXT")),
            _ => action.text(),
        };
        manager
            .create_table(
                Table::create()
                    .table(MerchandisingControls::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(MerchandisingControls::ControlId).string_len(64).not_null().primary_key())
                    .col(ColumnDef::new(MerchandisingControls::Segment).string_len(64).not_null())
                    .col(ColumnDef::new(MerchandisingControls::Profile).string_len(64).not_null())
                    .col(ColumnDef::new(MerchandisingControls::Windows).small_integer().not_null())
                    .col(ColumnDef::new(MerchandisingControls::ActiveFromUs).big_integer().not_null())
                    .col(ColumnDef::new(MerchandisingControls::ActiveUntilUs).big_integer().null())
                    .col(ColumnDef::new(MerchandisingControls::Kind).small_integer().not_null())
                    .col(action.not_null())
                    .col(ColumnDef::new(MerchandisingControls::Note).string_len(256).not_null())
                    .col(ColumnDef::new(MerchandisingControls::Revision).big_integer().not_null())
                    .col(ColumnDef::new(MerchandisingControls::UpdatedAtUs).big_integer().not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ControlRevision::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ControlRevision::Id).small_integer().not_null().primary_key())
                    .col(ColumnDef::new(ControlRevision::Revision).big_integer().not_null())
                    .to_owned(),
            )
            .await?;
        let first = Query::insert()
            .into_table(ControlRevision::Table)
            .columns([ControlRevision::Id, ControlRevision::Revision])
            .values_panic([1.into(), 0.into()])
            .to_owned();
        manager.exec_stmt(first).await?;
        let title = ColumnDef::new(ProductCatalog::Title).string_len(200).not_null().default("").to_owned();
        manager.alter_table(Table::alter().table(ProductCatalog::Table).add_column(title).to_owned()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let drop_title = Table::alter().table(ProductCatalog::Table).drop_column(ProductCatalog::Title).to_owned();
        manager.alter_table(drop_title).await?;
        manager.drop_table(Table::drop().table(ControlRevision::Table).if_exists().to_owned()).await?;
        manager.drop_table(Table::drop().table(MerchandisingControls::Table).if_exists().to_owned()).await
    }
}
