//! Statement arguments, bound the way each engine takes them, and
//! columns read back by name.
//!
//! Both engines take `$n` parameters; where they differ is arrays, which
//! PostgreSQL has (`unnest($1::bigint[])`) and SQLite has not (a JSON
//! array, read with `json_each($1)`). A store's operations are written
//! once against [`Arg`]s; [`bind`] turns them into the engine's values.

use serde_json::Value;
use sqlx::query::Query;

/// One statement argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// An integer or NULL.
    Int(Option<i64>),
    /// A string or NULL.
    Text(Option<String>),
    /// A boolean.
    Bool(bool),
    /// An array of integers or NULLs: a `BIGINT[]` on PostgreSQL, a JSON
    /// array (read with `json_each`) on SQLite.
    Ints(Vec<Option<i64>>),
    /// An array of strings or NULLs, bound as [`Ints`](Self::Ints) is.
    Texts(Vec<Option<String>>),
    /// An array of booleans, bound as [`Ints`](Self::Ints) is.
    Bools(Vec<bool>),
}

/// Statement arguments, `$1` first.
pub type Args = Vec<Arg>;

/// `args![a, b, …]`: statement arguments, `$1` first, from anything that
/// converts to an [`Arg`].
#[macro_export]
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        vec![$($crate::Arg::from($arg)),*]
    };
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}

impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}

impl From<crate::Timestamp> for Arg {
    fn from(t: crate::Timestamp) -> Self {
        Arg::Int(Some(t.as_millis()))
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}

impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}

impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}

impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}

/// A query of engine `DB` whose arguments it owns.
type Owned<DB> = Query<'static, DB, <DB as sqlx::Database>::Arguments>;

/// A database engine the stores run on: SQLite or PostgreSQL.
pub trait Engine: sqlx::Database {
    /// Binds `arg` as the query's next argument.
    fn bind_arg(query: Owned<Self>, arg: Arg) -> Owned<Self>;
}

/// Binds `args` in order, `$1` first.
pub fn bind<DB: Engine>(mut query: Owned<DB>, args: Args) -> Owned<DB> {
    for arg in args {
        query = DB::bind_arg(query, arg);
    }
    query
}

impl Engine for sqlx::Postgres {
    fn bind_arg(query: Owned<Self>, arg: Arg) -> Owned<Self> {
        match arg {
            Arg::Int(v) => query.bind(v),
            Arg::Text(v) => query.bind(v),
            Arg::Bool(v) => query.bind(v),
            Arg::Ints(v) => query.bind(v),
            Arg::Texts(v) => query.bind(v),
            Arg::Bools(v) => query.bind(v),
        }
    }
}

impl Engine for sqlx::Sqlite {
    fn bind_arg(query: Owned<Self>, arg: Arg) -> Owned<Self> {
        // SQLite has no arrays: a JSON array, read with `json_each`.
        fn json(values: impl Into<Value>) -> String {
            values.into().to_string()
        }
        match arg {
            Arg::Int(v) => query.bind(v),
            Arg::Text(v) => query.bind(v),
            Arg::Bool(v) => query.bind(v),
            Arg::Ints(v) => query.bind(json(v)),
            Arg::Texts(v) => query.bind(json(v)),
            Arg::Bools(v) => query.bind(json(v)),
        }
    }
}

/// Reads a column of a result row by name.
pub trait Columns {
    /// An integer column, `None` for NULL.
    ///
    /// # Errors
    /// No such column, or not an integer.
    fn int(&self, col: &str) -> Result<Option<i64>, sqlx::Error>;
    /// A text column, `None` for NULL.
    ///
    /// # Errors
    /// No such column, or not text.
    fn text(&self, col: &str) -> Result<Option<String>, sqlx::Error>;
    /// Where the column named `col` is in the row, for
    /// [`int_at`](Self::int_at) and [`text_at`](Self::text_at): the rows of
    /// one result share it, so many rows are read with one lookup a name
    /// instead of one a column a row.
    ///
    /// # Errors
    /// No such column.
    fn index_of(&self, col: &str) -> Result<usize, sqlx::Error>;
    /// The integer column at `index`, `None` for NULL.
    ///
    /// # Errors
    /// No such column, or not an integer.
    fn int_at(&self, index: usize) -> Result<Option<i64>, sqlx::Error>;
    /// The text column at `index`, `None` for NULL.
    ///
    /// # Errors
    /// No such column, or not text.
    fn text_at(&self, index: usize) -> Result<Option<String>, sqlx::Error>;
}

impl<R> Columns for R
where
    R: sqlx::Row,
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        self.try_get(col)
    }

    fn text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        self.try_get(col)
    }

    fn index_of(&self, col: &str) -> Result<usize, sqlx::Error> {
        sqlx::ColumnIndex::index(&col, self)
    }

    fn int_at(&self, index: usize) -> Result<Option<i64>, sqlx::Error> {
        self.try_get(index)
    }

    fn text_at(&self, index: usize) -> Result<Option<String>, sqlx::Error> {
        self.try_get(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_convert() {
        assert_eq!(
            crate::args![1, None::<i64>, "a", Some("b".to_owned()), true],
            [
                Arg::Int(Some(1)),
                Arg::Int(None),
                Arg::Text(Some("a".into())),
                Arg::Text(Some("b".into())),
                Arg::Bool(true),
            ]
        );
        assert_eq!(
            Arg::from(crate::Timestamp::from_millis(9)),
            Arg::Int(Some(9))
        );
    }
}
