//! What a tenant or one of its keys spent, minute by minute, counted as
//! budgets count it — so that a gateway that counts budgets in its own
//! memory can start again from the ledger after a restart.

use sqlx::{QueryBuilder, Row as _};

use sluice_store::Pool;

use crate::store::to_u64;
use crate::{Error, LedgerStore};

/// One minute's spend as budgets count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// The minute's start, ms since the Unix epoch.
    pub minute_ms: i64,
    /// Model and API calls that were answered without an error status
    /// (a failure gives its request back to budgets).
    pub requests: u64,
    /// Prompt and completion tokens of model calls.
    pub tokens: u64,
    /// Nanodollars.
    pub cost_nanos: u64,
}

impl LedgerStore {
    /// The spend of `tenant` (of its key `key_id` only, when given) in
    /// `[from_ms, to_ms)`, one row per minute that has any, in order.
    /// Cache hits and job attempts are left out (budgets do not count
    /// them); records are read rather than rollups, which do not tell
    /// those apart. The tenant's index serves both.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn spent(
        &self,
        tenant: &str,
        key_id: Option<&str>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<Spent>, Error> {
        macro_rules! read {
            ($pool:expr) => {{
                let rows = select_spent(tenant, key_id, from_ms, to_ms)
                    .build()
                    .fetch_all($pool)
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok(Spent {
                            minute_ms: r.try_get("minute_ms")?,
                            requests: to_u64(r.try_get("requests")?),
                            tokens: to_u64(r.try_get("tokens")?),
                            cost_nanos: to_u64(r.try_get("cost_nanos")?),
                        })
                    })
                    .collect()
            }};
        }
        match &self.db {
            Pool::Sqlite(pool) => read!(pool),
            Pool::Postgres(pool) => read!(pool),
        }
    }
}

fn select_spent<DB>(
    tenant: &str,
    key_id: Option<&str>,
    from_ms: i64,
    to_ms: i64,
) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    bool: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(
        "SELECT at_ms - (at_ms % 60000) AS minute_ms, \
         CAST(SUM(CASE WHEN status BETWEEN 1 AND 399 THEN 1 ELSE 0 END) AS BIGINT) AS requests, \
         CAST(SUM(CASE WHEN kind = 'model' THEN prompt_tokens + completion_tokens ELSE 0 END) AS BIGINT) AS tokens, \
         CAST(SUM(cost_nanos) AS BIGINT) AS cost_nanos \
         FROM usage_records WHERE tenant = ",
    );
    q.push_bind(tenant.to_owned());
    if let Some(k) = key_id {
        q.push(" AND key_id = ").push_bind(k.to_owned());
    }
    q.push(" AND at_ms >= ")
        .push_bind(from_ms)
        .push(" AND at_ms < ")
        .push_bind(to_ms)
        .push(" AND kind IN ('model', 'api') AND cache_hit = ")
        .push_bind(false)
        .push(" GROUP BY minute_ms ORDER BY minute_ms");
    q
}
