//! What every SQL store of Sluice (jobs, keys, audit, the usage ledger)
//! shares: opening SQLite and PostgreSQL pools, binding statement
//! arguments the way each engine takes them, embedded migrations, and
//! the wall clock.
//!
//! Each store keeps its SQL in `migrations/<backend>/NNNN_name.sql`,
//! embeds it with `include_str!`, and lists it as [`Step`]s of a
//! [`Schema`] rather than with `sqlx::migrate!` (whose proc macros are a
//! long compile on two cores). Stores that share one database keep their
//! histories apart by naming their own migrations table.
//!
//! ```
//! use sluice_store::{Arg, Columns, PoolOptions, Schema, Step, args, bind};
//!
//! const SQLITE: &[Step] = &[Step::new(1, "notes", "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")];
//! const SCHEMA: Schema = Schema::new(SQLITE).table("_notes_migrations");
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = SCHEMA.sqlite_in_memory(PoolOptions::new(1)).await?;
//! let insert = sqlx::query("INSERT INTO notes (id, body) VALUES ($1, $2)");
//! bind(insert, args![7, "hello"]).execute(&pool).await?;
//! let row = sqlx::query("SELECT * FROM notes").fetch_one(&pool).await?;
//! assert_eq!(row.text("body")?.as_deref(), Some("hello"));
//! # let _: Arg = Arg::from(1);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod arg;
mod clock;
mod pools;
mod schema;

pub use arg::{Arg, Args, Columns, Engine, bind};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp, now_ms};
pub use pools::{PG_ACQUIRE_TIMEOUT, Pool, PoolOptions};
pub use schema::{Schema, Step};
