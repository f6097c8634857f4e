//! `product_catalog`: per product, the segments it belongs to and whether it is hidden
//! (UpdateCatalog). A product with no row is in no segment and not hidden.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261201_000002_create_product_catalog"
    }
}

#[derive(DeriveIden)]
enum ProductCatalog {
    Table,
    ProductId,
    /// 1 = hidden (delisted, out of stock): left out of every ranking; 0 = shown.
    Hidden,
    /// The segment names, sorted and separated by single spaces (names contain none); at
    /// most 32 of at most 64 characters each.
    Segments,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ProductCatalog::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ProductCatalog::ProductId).big_integer().not_null().primary_key())
                    .col(ColumnDef::new(ProductCatalog::Hidden).small_integer().not_null())
                    .col(ColumnDef::new(ProductCatalog::Segments).string_len(2_100).not_null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(ProductCatalog::Table).if_exists().to_owned()).await
    }
}
