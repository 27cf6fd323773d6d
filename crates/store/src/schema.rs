//! Embedded migrations: [`Step`]s in a [`Schema`], run by sqlx's [`Migrator`].

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// One embedded migration.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    version: i64,
    description: &'static str,
    sql: &'static str,
}

impl Step {
    /// Migration `version` (applied in increasing order, never edited once
    /// released: sqlx refuses a changed checksum), described for its
    /// history row, running `sql`.
    pub const fn new(version: i64, description: &'static str, sql: &'static str) -> Step {
        Step {
            version,
            description,
            sql,
        }
    }
}

/// A backend's migrations and the table that records which ran.
#[derive(Debug, Clone, Copy)]
pub struct Schema {
    steps: &'static [Step],
    table: Option<&'static str>,
}

impl Schema {
    /// `steps`, recorded in sqlx's default table (`_sqlx_migrations`).
    ///
    /// # Panics
    /// At compile time (in a `const`) or on first use, if the versions do
    /// not strictly increase: sqlx would otherwise run them out of order
    /// or report a missing one against an existing database.
    pub const fn new(steps: &'static [Step]) -> Schema {
        let mut i = 1;
        while i < steps.len() {
            assert!(
                steps[i - 1].version < steps[i].version,
                "migration versions must strictly increase"
            );
            i += 1;
        }
        Schema { steps, table: None }
    }

    /// Recorded in `table` instead, so that stores sharing a database keep
    /// separate histories (sqlx would take another store's rows for
    /// migrations it does not know).
    pub const fn table(mut self, table: &'static str) -> Schema {
        self.table = Some(table);
        self
    }

    /// The migrator, ready to `run` on a pool or connection.
    pub fn migrator(&self) -> Migrator {
        let mut m = Migrator::with_migrations(
            self.steps
                .iter()
                .map(|s| {
                    Migration::new(
                        s.version,
                        Cow::Borrowed(s.description),
                        MigrationType::Simple,
                        s.sql.into_sql_str(),
                        false,
                    )
                })
                .collect(),
        );
        if let Some(table) = self.table {
            m.dangerous_set_table_name(table);
        }
        m
    }
}
