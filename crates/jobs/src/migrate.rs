//! The schema of each backend, embedded in the binary.

use sluice_store::{Schema, Step};

/// SQLite's migrations, in sqlx's default history table.
pub const SQLITE: Schema = Schema::new(SQLITE_STEPS);

/// The steps of [`SQLITE`] (a prefix of them builds an older schema, to
/// test an upgrade).
pub(crate) const SQLITE_STEPS: &[Step] = &[
    Step::new(
        1,
        "jobs",
        include_str!("../migrations/sqlite/0001_jobs.sql"),
    ),
    Step::new(
        2,
        "jobs by tenant",
        include_str!("../migrations/sqlite/0002_jobs_tenant.sql"),
    ),
    Step::new(
        3,
        "due and tenant groups",
        include_str!("../migrations/sqlite/0003_due_and_tenant_groups.sql"),
    ),
    Step::new(
        4,
        "jobs by tenant with filters",
        include_str!("../migrations/sqlite/0004_jobs_tenant_filters.sql"),
    ),
    Step::new(
        5,
        "the enqueuer's traceparent",
        include_str!("../migrations/sqlite/0005_job_traceparent.sql"),
    ),
    Step::new(
        6,
        "schedules, a job's schedule and progress",
        include_str!("../migrations/sqlite/0006_schedules.sql"),
    ),
    Step::new(
        7,
        "job events",
        include_str!("../migrations/sqlite/0007_job_events.sql"),
    ),
    Step::new(
        8,
        "flows",
        include_str!("../migrations/sqlite/0008_flows.sql"),
    ),
    Step::new(
        9,
        "a job's events by job",
        include_str!("../migrations/sqlite/0009_job_timeline.sql"),
    ),
    Step::new(
        10,
        "events expire by seq",
        include_str!("../migrations/sqlite/0010_cheaper_events.sql"),
    ),
    Step::new(
        11,
        "fewer index moves",
        include_str!("../migrations/sqlite/0011_fewer_index_moves.sql"),
    ),
    Step::new(
        12,
        "a job's timeline from its rows",
        include_str!("../migrations/sqlite/0012_timeline_from_rows.sql"),
    ),
];

/// PostgreSQL's migrations, in sqlx's default history table.
pub const POSTGRES: Schema = Schema::new(&[
    Step::new(
        1,
        "jobs",
        include_str!("../migrations/postgres/0001_jobs.sql"),
    ),
    Step::new(
        2,
        "jobs by tenant",
        include_str!("../migrations/postgres/0002_jobs_tenant.sql"),
    ),
    Step::new(
        3,
        "due and tenant groups",
        include_str!("../migrations/postgres/0003_due_and_tenant_groups.sql"),
    ),
    Step::new(
        4,
        "jobs by tenant with filters",
        include_str!("../migrations/postgres/0004_jobs_tenant_filters.sql"),
    ),
    Step::new(
        5,
        "the enqueuer's traceparent",
        include_str!("../migrations/postgres/0005_job_traceparent.sql"),
    ),
    Step::new(
        6,
        "leases renewed in place",
        include_str!("../migrations/postgres/0006_hot_leases.sql"),
    ),
    Step::new(
        7,
        "schedules, a job's schedule and progress",
        include_str!("../migrations/postgres/0007_schedules.sql"),
    ),
    Step::new(
        8,
        "job events",
        include_str!("../migrations/postgres/0008_job_events.sql"),
    ),
    Step::new(
        9,
        "flows",
        include_str!("../migrations/postgres/0009_flows.sql"),
    ),
    Step::new(
        10,
        "a job's events by job",
        include_str!("../migrations/postgres/0010_job_timeline.sql"),
    ),
    Step::new(
        11,
        "events expire by seq",
        include_str!("../migrations/postgres/0011_cheaper_events.sql"),
    ),
    Step::new(
        12,
        "event triggers pair rows by hashing",
        include_str!("../migrations/postgres/0012_event_trigger_joins.sql"),
    ),
    Step::new(
        13,
        "fewer index moves",
        include_str!("../migrations/postgres/0013_fewer_index_moves.sql"),
    ),
    Step::new(
        14,
        "a job's timeline from its rows",
        include_str!("../migrations/postgres/0014_timeline_from_rows.sql"),
    ),
]);
