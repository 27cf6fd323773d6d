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
pub const POSTGRES: Schema = Schema::new(POSTGRES_STEPS);

/// The steps of [`POSTGRES`] (a prefix of them builds an older schema, to
/// test an upgrade).
pub(crate) const POSTGRES_STEPS: &[Step] = &[
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
];

/// An older database's history, for the upgrade tests of both backends.
#[cfg(test)]
pub(crate) mod older {
    use crate::events::JobEvent;

    /// Job 1 failed once, then completed; job 2 is running. Written on
    /// the schema before the timeline's runs (SQLite's migration 12,
    /// PostgreSQL's 14), whose triggers write the events.
    pub const HISTORY: &str = "\
        INSERT INTO jobs (queue, kind, payload, tenant, grp, run_at, state, due, created_at, updated_at) \
          VALUES ('q', 'k', '{}', 't', 'g', 1, 'available', TRUE, 1, 1), \
                 ('q', 'k', '{}', 't', 'g', 1, 'available', TRUE, 1, 1); \
        UPDATE jobs SET state = 'running', due = FALSE, updated_at = 2 WHERE id = 1; \
        UPDATE jobs SET progress = '1', updated_at = 3 WHERE id = 1; \
        UPDATE jobs SET state = 'retryable', due = TRUE, attempts = 1, last_error = 'x', run_at = 5, \
          updated_at = 4 WHERE id = 1; \
        UPDATE jobs SET state = 'running', due = FALSE, updated_at = 6 WHERE id = 1; \
        UPDATE jobs SET state = 'completed', attempts = 2, updated_at = 7, finished_at = 7 WHERE id = 1; \
        UPDATE jobs SET state = 'running', due = FALSE, updated_at = 8 WHERE id = 2;";

    /// What the upgraded `store` must say of [`HISTORY`]: each job's
    /// timeline whole, and the counts as before.
    pub async fn check<B: crate::backend::Backend>(store: &crate::sql_store::Store<B>) {
        use crate::JobStore;
        let seen = |events: Vec<JobEvent>| -> Vec<(String, i64, u32)> {
            events
                .into_iter()
                .map(|e| (e.event, e.at.as_millis(), e.attempts))
                .collect()
        };
        let want = |events: &[(&str, i64, u32)]| -> Vec<(String, i64, u32)> {
            events
                .iter()
                .map(|(e, at, n)| ((*e).to_owned(), *at, *n))
                .collect()
        };
        let one = store
            .timeline(crate::JobId(1), 100)
            .await
            .expect("timeline");
        assert_eq!(
            seen(one),
            want(&[
                ("enqueued", 1, 0),
                ("active", 2, 0),
                ("progress", 3, 0),
                ("failed", 4, 1),
                ("active", 6, 1),
                ("completed", 7, 2),
            ])
        );
        let two = store
            .timeline(crate::JobId(2), 100)
            .await
            .expect("timeline");
        assert_eq!(seen(two), want(&[("enqueued", 1, 0), ("active", 8, 0)]));
        let counts = store.counts().await.expect("counts");
        let q = &counts
            .iter()
            .find(|c| c.queue == "q")
            .expect("queue q")
            .counts;
        assert_eq!((q.completed, q.running, q.total()), (1, 1, 2), "{counts:?}");
    }
}
