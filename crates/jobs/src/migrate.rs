//! The schema of each backend, embedded in the binary.

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// SQLite's migrations: (version, description, SQL).
pub const SQLITE: &[(i64, &str, &str)] = &[
    (
        1,
        "jobs",
        include_str!("../migrations/sqlite/0001_jobs.sql"),
    ),
    (
        2,
        "jobs by tenant",
        include_str!("../migrations/sqlite/0002_jobs_tenant.sql"),
    ),
    (
        3,
        "due and tenant groups",
        include_str!("../migrations/sqlite/0003_due_and_tenant_groups.sql"),
    ),
    (
        4,
        "jobs by tenant with filters",
        include_str!("../migrations/sqlite/0004_jobs_tenant_filters.sql"),
    ),
];

/// PostgreSQL's migrations: (version, description, SQL).
pub const POSTGRES: &[(i64, &str, &str)] = &[
    (
        1,
        "jobs",
        include_str!("../migrations/postgres/0001_jobs.sql"),
    ),
    (
        2,
        "jobs by tenant",
        include_str!("../migrations/postgres/0002_jobs_tenant.sql"),
    ),
    (
        3,
        "due and tenant groups",
        include_str!("../migrations/postgres/0003_due_and_tenant_groups.sql"),
    ),
    (
        4,
        "jobs by tenant with filters",
        include_str!("../migrations/postgres/0004_jobs_tenant_filters.sql"),
    ),
];

/// A migrator over `migrations`. Built by hand rather than with
/// `sqlx::migrate!`, which would pull in sqlx's proc macros.
pub fn migrator(migrations: &'static [(i64, &'static str, &'static str)]) -> Migrator {
    Migrator::with_migrations(
        migrations
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}
