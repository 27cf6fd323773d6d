//! [`KeyStore`]: tiers, tenants and keys in SQLite (one machine) or
//! PostgreSQL (several gateways), with the schema embedded.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sluice_store::{Clock, Pool, PoolOptions, Schema, Step, SystemClock};
use sqlx::postgres::PgPool;
use sqlx::{PgConnection, SqliteConnection};

use crate::budget::Budget;
use crate::db::{Conn, StoredKey};
use crate::error::Error;
use crate::limits::Limits;
use crate::model::{
    IssuedKey, KeyRecord, KeyState, NewKey, NewTenant, TenantRecord, TenantState, Tier, Update,
};
use crate::ops;

/// The schema's own migrations table: the job store may share the
/// database and keeps its history in sqlx's default one.
const MIGRATIONS_TABLE: &str = "_sluice_keys_migrations";

const SQLITE: Schema = Schema::new(&[
    Step::new(
        1,
        "tiers, tenants, keys",
        include_str!("../migrations/sqlite/0001_keys.sql"),
    ),
    Step::new(
        2,
        "budgets",
        include_str!("../migrations/sqlite/0002_budgets.sql"),
    ),
])
.table(MIGRATIONS_TABLE);

const POSTGRES: Schema = Schema::new(&[
    Step::new(
        1,
        "tiers, tenants, keys",
        include_str!("../migrations/postgres/0001_keys.sql"),
    ),
    Step::new(
        2,
        "budgets",
        include_str!("../migrations/postgres/0002_budgets.sql"),
    ),
])
.table(MIGRATIONS_TABLE);

/// Four connections: key checks go through the cache, changes are rare.
const POOL: PoolOptions = PoolOptions::new(4).foreign_keys(true);

/// A failure to open the store: a schema that cannot be migrated is
/// [`Error::Migrate`], anything else [`Error::Database`].
fn opening(e: sqlx::Error) -> Error {
    match e {
        sqlx::Error::Migrate(m) => Error::Migrate(*m),
        e => Error::Database(e),
    }
}

/// Tiers, tenants and API keys. Cheap to clone (the pool is shared).
///
/// Every change runs in one transaction; keys are kept only as SHA-256
/// hashes. Checking a key on every request goes through a
/// [`KeyCache`](crate::KeyCache), not here.
#[derive(Debug, Clone)]
pub struct KeyStore {
    db: Pool,
    clock: Arc<dyn Clock>,
}

/// Runs `$body` (a future over the connection `$c`) in a writing
/// transaction and commits it.
macro_rules! write {
    ($self:ident, |$c:ident| $body:expr) => {
        match &$self.db {
            Pool::Sqlite(pool) => {
                // IMMEDIATE: take the write lock first, so that a change
                // that reads before it writes waits for another writer
                // (busy timeout) instead of failing to upgrade.
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                let out = {
                    let $c: &mut SqliteConnection = &mut tx;
                    $body.await?
                };
                tx.commit().await?;
                Ok(out)
            }
            Pool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let out = {
                    let $c: &mut PgConnection = &mut tx;
                    $body.await?
                };
                tx.commit().await?;
                Ok(out)
            }
        }
    };
}

/// Runs `$body` on a pooled connection.
macro_rules! read {
    ($self:ident, |$c:ident| $body:expr) => {
        match &$self.db {
            Pool::Sqlite(pool) => {
                let mut conn = pool.acquire().await?;
                let $c: &mut SqliteConnection = &mut conn;
                $body.await
            }
            Pool::Postgres(pool) => {
                let mut conn = pool.acquire().await?;
                let $c: &mut PgConnection = &mut conn;
                $body.await
            }
        }
    };
}

impl KeyStore {
    /// Opens (creating if needed) the SQLite file at `path` in WAL mode
    /// and brings its schema up to date.
    ///
    /// # Errors
    /// [`Error::Database`] if the file cannot be opened, [`Error::Migrate`]
    /// if the schema cannot be migrated.
    pub async fn open(path: impl AsRef<Path>) -> Result<KeyStore, Error> {
        let pool = SQLITE.open_sqlite(path, POOL).await.map_err(opening)?;
        Ok(KeyStore::new(Pool::Sqlite(pool)))
    }

    /// A store in a private in-memory SQLite database.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn in_memory() -> Result<KeyStore, Error> {
        let pool = SQLITE.sqlite_in_memory(POOL).await.map_err(opening)?;
        Ok(KeyStore::new(Pool::Sqlite(pool)))
    }

    /// Connects to PostgreSQL at `url` with a pool of up to 4 connections
    /// (a call waits at most 2 s for one) and brings the schema up to date.
    ///
    /// # Errors
    /// [`Error::Database`] if the URL is bad or the server unreachable,
    /// [`Error::Migrate`] if the schema cannot be migrated.
    pub async fn connect(url: &str) -> Result<KeyStore, Error> {
        let pool = POSTGRES
            .connect_postgres(url, POOL)
            .await
            .map_err(opening)?;
        Ok(KeyStore::new(Pool::Postgres(pool)))
    }

    /// A store on an existing PostgreSQL pool (its size, schema, TLS),
    /// whose schema it brings up to date.
    ///
    /// # Errors
    /// [`Error::Migrate`] if the schema cannot be migrated.
    pub async fn from_pool(pool: PgPool) -> Result<KeyStore, Error> {
        POSTGRES.migrator().run(&pool).await?;
        Ok(KeyStore::new(Pool::Postgres(pool)))
    }

    fn new(db: Pool) -> KeyStore {
        KeyStore {
            db,
            clock: Arc::new(SystemClock),
        }
    }

    /// Reads the time from `clock` (for tests of grace periods).
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> KeyStore {
        self.clock = Arc::new(clock);
        self
    }

    /// Now, by the store's clock (ms since the epoch).
    pub fn now_ms(&self) -> i64 {
        self.clock.now().as_millis()
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// Creates tier `name`.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming a bad field, [`Error::Conflict`] if it
    /// exists.
    pub async fn create_tier(&self, name: &str, limits: &Limits) -> Result<Tier, Error> {
        self.create_tier_with(name, limits, &[]).await
    }

    /// Creates tier `name` with budgets: each member spends its own.
    ///
    /// # Errors
    /// As [`create_tier`](Self::create_tier); a bad budget is named
    /// (`budgets[0].period`).
    pub async fn create_tier_with(
        &self,
        name: &str,
        limits: &Limits,
        budgets: &[Budget],
    ) -> Result<Tier, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::create_tier(c, name, limits, budgets, now))
    }

    /// Replaces the limits of tier `name`: every member follows.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming a bad field, [`Error::NotFound`].
    pub async fn update_tier(&self, name: &str, limits: &Limits) -> Result<Tier, Error> {
        self.update_tier_with(name, Some(limits), None).await
    }

    /// Replaces the limits and/or the budgets of tier `name` (`None`
    /// keeps them): every member follows.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming a bad field, [`Error::NotFound`].
    pub async fn update_tier_with(
        &self,
        name: &str,
        limits: Option<&Limits>,
        budgets: Option<&[Budget]>,
    ) -> Result<Tier, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::update_tier(c, name, limits, budgets, now))
    }

    /// Tier `name`, if it exists.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn tier(&self, name: &str) -> Result<Option<Tier>, Error> {
        read!(self, |c| ops::tier(c, name))
    }

    /// Every tier, by name.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn tiers(&self) -> Result<Vec<Tier>, Error> {
        read!(self, |c| c.tiers(crate::sql::LIST_TIERS, vec![]))
    }

    /// Creates a tenant.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming a bad field (a tier that does not exist
    /// is `tier`), [`Error::Conflict`] if it exists.
    pub async fn create_tenant(&self, new: &NewTenant) -> Result<TenantRecord, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::create_tenant(c, new, now))
    }

    /// Changes a tenant's tier, limits or tags.
    ///
    /// # Errors
    /// [`Error::Invalid`], [`Error::NotFound`].
    pub async fn update_tenant(&self, name: &str, update: &Update) -> Result<TenantRecord, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::update_tenant(c, name, update, now))
    }

    /// Blocks a tenant: all its keys are refused until [`unblock_tenant`](Self::unblock_tenant).
    ///
    /// # Errors
    /// [`Error::NotFound`].
    pub async fn block_tenant(&self, name: &str) -> Result<TenantRecord, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::set_tenant_state(
            c,
            name,
            TenantState::Blocked,
            now
        ))
    }

    /// Unblocks a tenant.
    ///
    /// # Errors
    /// [`Error::NotFound`].
    pub async fn unblock_tenant(&self, name: &str) -> Result<TenantRecord, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::set_tenant_state(
            c,
            name,
            TenantState::Active,
            now
        ))
    }

    /// Deletes tenant `name` and all its keys (refused from now on, and
    /// gone from every list), returning what was deleted. The usage
    /// ledger and audit trail keep their history of it.
    ///
    /// # Errors
    /// [`Error::NotFound`].
    pub async fn delete_tenant(&self, name: &str) -> Result<(TenantRecord, Vec<KeyRecord>), Error> {
        write!(self, |c| ops::delete_tenant(c, name))
    }

    /// Tenant `name`, if it exists.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn tenant(&self, name: &str) -> Result<Option<TenantRecord>, Error> {
        read!(self, |c| ops::tenant(c, name))
    }

    /// Every tenant, by name.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn tenants(&self) -> Result<Vec<TenantRecord>, Error> {
        read!(self, |c| c.tenants(crate::sql::LIST_TENANTS, vec![]))
    }

    /// Issues a key to a tenant. The returned [`IssuedKey::key`] is the
    /// only copy of the secret.
    ///
    /// # Errors
    /// [`Error::Invalid`], [`Error::NotFound`] for the tenant.
    pub async fn issue_key(&self, new: &NewKey) -> Result<IssuedKey, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::issue_key(c, new, now))
    }

    /// Key `id`, if it exists.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn key(&self, id: &str) -> Result<Option<KeyRecord>, Error> {
        Ok(self.stored_key(id).await?.map(|k| k.record))
    }

    pub(crate) async fn stored_key(&self, id: &str) -> Result<Option<StoredKey>, Error> {
        read!(self, |c| ops::stored_key(c, id))
    }

    /// The keys of `tenant` (or every key), oldest first.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn keys(&self, tenant: Option<&str>) -> Result<Vec<KeyRecord>, Error> {
        read!(self, |c| ops::keys(c, tenant))
    }

    /// Changes a key's tier, limits or tags.
    ///
    /// # Errors
    /// [`Error::Invalid`], [`Error::NotFound`].
    pub async fn update_key(&self, id: &str, update: &Update) -> Result<KeyRecord, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::update_key(c, id, update, now))
    }

    /// Replaces active key `id` with a new one like it; `id` keeps working
    /// for `grace` (at most 30 days). Returns the new key and the old
    /// one's record.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::WrongState`] if it is not active,
    /// [`Error::Invalid`] (`grace_seconds`) for too long a grace.
    pub async fn rotate_key(
        &self,
        id: &str,
        grace: Duration,
    ) -> Result<(IssuedKey, KeyRecord), Error> {
        let now = self.now_ms();
        write!(self, |c| ops::rotate_key(c, id, grace, now))
    }

    /// Revokes key `id` for good (a rotated key's grace ends now).
    ///
    /// # Errors
    /// [`Error::NotFound`].
    pub async fn revoke_key(&self, id: &str) -> Result<KeyRecord, Error> {
        let now = self.now_ms();
        let from = [KeyState::Active, KeyState::Blocked, KeyState::Rotated];
        write!(self, |c| ops::set_key_state(
            c,
            id,
            KeyState::Revoked,
            &from,
            "revoke",
            now
        ))
    }

    /// Deletes key `id`, whatever its state: refused from now on, and
    /// gone from every list.
    ///
    /// # Errors
    /// [`Error::NotFound`].
    pub async fn delete_key(&self, id: &str) -> Result<KeyRecord, Error> {
        write!(self, |c| ops::delete_key(c, id))
    }

    /// Blocks active key `id` until [`unblock_key`](Self::unblock_key).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::WrongState`] for a revoked or rotated key.
    pub async fn block_key(&self, id: &str) -> Result<KeyRecord, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::set_key_state(
            c,
            id,
            KeyState::Blocked,
            &[KeyState::Active],
            "block",
            now
        ))
    }

    /// Unblocks key `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::WrongState`] for a revoked or rotated key.
    pub async fn unblock_key(&self, id: &str) -> Result<KeyRecord, Error> {
        let now = self.now_ms();
        write!(self, |c| ops::set_key_state(
            c,
            id,
            KeyState::Active,
            &[KeyState::Blocked],
            "unblock",
            now
        ))
    }
}
