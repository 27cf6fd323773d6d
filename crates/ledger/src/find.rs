//! The request log: records picked by who, what, when and how they
//! ended, newest first, a page at a time ([`LedgerStore::find`]).

use sqlx::QueryBuilder;

use crate::store::{LedgerStore, RECORD_COLUMNS, record_pg, record_sqlite, to_u64};
use crate::{Bodies, Error, Record};
use sluice_store::Pool;

/// The most records one page holds.
pub const MAX_PAGE: u32 = 1_000;

/// Which records [`LedgerStore::find`] returns. Every field narrows;
/// none set is every record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub tenant: Option<String>,
    pub key_id: Option<String>,
    /// The model (or API) as recorded.
    pub model: Option<String>,
    /// `model`, `api` or `job`.
    pub kind: Option<String>,
    pub request_id: Option<String>,
    /// One status.
    pub status: Option<u16>,
    /// Only statuses of 400 and above.
    pub errors: bool,
    /// From this time on (ms since the epoch), inclusive.
    pub from_ms: Option<i64>,
    /// Before this time, exclusive.
    pub to_ms: Option<i64>,
    /// Records older than this one (its id, from a previous page's last).
    pub before_id: Option<i64>,
    /// At most this many (capped at [`MAX_PAGE`]; 0 takes 100).
    pub limit: u32,
}

impl Filter {
    /// The page size asked, within its bounds.
    pub fn page(&self) -> u32 {
        match self.limit {
            0 => 100,
            n => n.min(MAX_PAGE),
        }
    }
}

impl LedgerStore {
    /// Records `filter` picks with their ids, newest first.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn find(&self, filter: &Filter) -> Result<Vec<(i64, Record)>, Error> {
        match &self.db {
            Pool::Sqlite(pool) => {
                let rows = select(filter).build().fetch_all(pool).await?;
                rows.iter().map(record_sqlite).collect()
            }
            Pool::Postgres(pool) => {
                let rows = select(filter).build().fetch_all(pool).await?;
                rows.iter().map(record_pg).collect()
            }
        }
    }
}

impl LedgerStore {
    /// The record stored under `id` (a row id as [`find`](Self::find)
    /// returns them), with its bodies when they were kept and are still
    /// there; `None` when there is none, or it is not `tenant`'s when one
    /// is given.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn get(&self, id: i64, tenant: Option<&str>) -> Result<Option<(i64, Record)>, Error> {
        let filter = Filter {
            tenant: tenant.map(str::to_owned),
            before_id: id.checked_add(1),
            limit: 1,
            ..Filter::default()
        };
        let Some((found, mut record)) = self.find(&filter).await?.pop() else {
            return Ok(None);
        };
        if found != id {
            return Ok(None);
        }
        let key = record.key().into_owned();
        record.bodies = match &self.db {
            Pool::Sqlite(pool) => match bodies_query(key).fetch_optional(pool).await? {
                Some(r) => Some(bodies_sqlite(&r)?),
                None => None,
            },
            Pool::Postgres(pool) => match bodies_query(key).fetch_optional(pool).await? {
                Some(r) => Some(bodies_pg(&r)?),
                None => None,
            },
        };
        Ok(Some((found, record)))
    }

    /// Deletes the bodies of records before `before_ms` (the records
    /// stay); returns how many.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn purge_bodies(&self, before_ms: i64) -> Result<u64, Error> {
        const SQL: &str = "DELETE FROM usage_bodies WHERE at_ms < $1";
        Ok(match &self.db {
            Pool::Sqlite(pool) => sqlx::query(SQL)
                .bind(before_ms)
                .execute(pool)
                .await?
                .rows_affected(),
            Pool::Postgres(pool) => sqlx::query(SQL)
                .bind(before_ms)
                .execute(pool)
                .await?
                .rows_affected(),
        })
    }
}

fn bodies_query<'q, DB>(
    key: String,
) -> sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>
where
    DB: sqlx::Database,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    sqlx::query(
        "SELECT request, request_bytes, response, response_bytes FROM usage_bodies WHERE uid = $1",
    )
    .bind(key)
}

macro_rules! bodies_decoder {
    ($name:ident, $row:ty) => {
        fn $name(r: &$row) -> Result<Bodies, Error> {
            use sqlx::Row as _;
            Ok(Bodies {
                request: r.try_get("request")?,
                request_bytes: to_u64(r.try_get("request_bytes")?),
                response: r.try_get("response")?,
                response_bytes: to_u64(r.try_get("response_bytes")?),
            })
        }
    };
}

bodies_decoder!(bodies_sqlite, sqlx::sqlite::SqliteRow);
bodies_decoder!(bodies_pg, sqlx::postgres::PgRow);

fn select<DB>(f: &Filter) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(format!(
        "SELECT id, {RECORD_COLUMNS} FROM usage_records WHERE 1 = 1"
    ));
    let texts = [
        ("tenant", &f.tenant),
        ("key_id", &f.key_id),
        ("model", &f.model),
        ("kind", &f.kind),
        ("request_id", &f.request_id),
    ];
    for (column, value) in texts {
        if let Some(v) = value {
            q.push(format!(" AND {column} = ")).push_bind(v.clone());
        }
    }
    if let Some(s) = f.status {
        q.push(" AND status = ").push_bind(i64::from(s));
    }
    if f.errors {
        q.push(" AND status >= 400");
    }
    if let Some(t) = f.from_ms {
        q.push(" AND at_ms >= ").push_bind(t);
    }
    if let Some(t) = f.to_ms {
        q.push(" AND at_ms < ").push_bind(t);
    }
    if let Some(id) = f.before_id {
        q.push(" AND id < ").push_bind(id);
    }
    q.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(f.page()));
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, tenant: &str, status: u16) -> Record {
        let mut r = Record::new(
            id,
            tenant,
            "model",
            "openai",
            "openai/gpt-4o-mini",
            "/v1/chat/completions",
        );
        r.status = status;
        r
    }

    #[tokio::test]
    async fn a_filter_narrows_and_pages_newest_first() {
        let store = LedgerStore::in_memory().await.unwrap();
        let mut records = Vec::new();
        for i in 0..7 {
            let status = if i % 3 == 0 { 429 } else { 200 };
            records.push(record(
                &format!("r{i}"),
                if i < 5 { "acme" } else { "globex" },
                status,
            ));
        }
        records[6].key_id = Some("k9".into());
        store.insert(&records).await.unwrap();
        let ids = |page: &[(i64, Record)]| -> Vec<String> {
            page.iter().map(|(_, r)| r.request_id.clone()).collect()
        };
        let all = store.find(&Filter::default()).await.unwrap();
        assert_eq!(ids(&all), ["r6", "r5", "r4", "r3", "r2", "r1", "r0"]);
        let acme = Filter {
            tenant: Some("acme".into()),
            limit: 2,
            ..Filter::default()
        };
        let first = store.find(&acme).await.unwrap();
        assert_eq!(ids(&first), ["r4", "r3"]);
        let next = Filter {
            before_id: Some(first[1].0),
            ..acme.clone()
        };
        assert_eq!(ids(&store.find(&next).await.unwrap()), ["r2", "r1"]);
        let errors = Filter {
            errors: true,
            ..Filter::default()
        };
        assert_eq!(ids(&store.find(&errors).await.unwrap()), ["r6", "r3", "r0"]);
        let one = Filter {
            request_id: Some("r5".into()),
            ..Filter::default()
        };
        assert_eq!(ids(&store.find(&one).await.unwrap()), ["r5"]);
        let key = Filter {
            key_id: Some("k9".into()),
            status: Some(429),
            ..Filter::default()
        };
        assert_eq!(ids(&store.find(&key).await.unwrap()), ["r6"]);
        let none = Filter {
            from_ms: Some(i64::MAX - 1),
            ..Filter::default()
        };
        assert!(store.find(&none).await.unwrap().is_empty());
        assert_eq!(
            Filter {
                limit: 1_000_000,
                ..Filter::default()
            }
            .page(),
            MAX_PAGE
        );
    }
}
