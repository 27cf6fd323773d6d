//! [`Kind`]: a job kind as a whole (its name, the check of a payload when
//! a job is enqueued, the handler that runs it), and [`Kinds`], the
//! registry a server takes them from. A kind defined in a crate of its
//! own is accepted by a jobs API and run by its workers once registered.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::handler::{Handlers, JobHandler};

/// A payload that does not fit its kind, naming the JSON field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PayloadError {
    /// The field as a path from the job: `payload.guild_id`, `payload`,
    /// or `kind` for a kind that does not exist.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl PayloadError {
    /// An error for `field` (a full path such as `payload.name`).
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// An error for the payload's field `name` (`payload.{name}`).
    pub fn at(name: &str, message: impl Into<String>) -> Self {
        Self::new(format!("payload.{name}"), message)
    }
}

/// A job kind: what a jobs API checks before it stores a job, and what
/// the workers run it with.
///
/// ```
/// use std::sync::Arc;
/// use serde_json::{Value, json};
/// use sluice_jobs::worker::{JobHandler, Outcome, handler_fn};
/// use sluice_jobs::{Kind, Kinds, PayloadError};
///
/// /// Sends `text` to the log: a kind of our own.
/// #[derive(Debug)]
/// struct Log;
///
/// impl Kind for Log {
///     fn name(&self) -> &str {
///         "log"
///     }
///
///     fn check(&self, payload: &Value) -> Result<(), PayloadError> {
///         match payload.get("text") {
///             Some(Value::String(t)) if t.len() <= 1_000 => Ok(()),
///             _ => Err(PayloadError::at("text", "must be a string of at most 1000 bytes")),
///         }
///     }
///
///     fn handler(&self) -> Arc<dyn JobHandler> {
///         Arc::new(handler_fn(|job| async move { Outcome::Completed(job.payload) }))
///     }
/// }
///
/// let kinds = Kinds::new().with(Log);
/// assert!(kinds.check("log", &json!({"text": "hi"})).is_ok());
/// assert_eq!(kinds.check("log", &json!({})).unwrap_err().field, "payload.text");
/// assert_eq!(kinds.check("smtp", &json!({})).unwrap_err().field, "kind");
/// assert_eq!(kinds.handlers().kinds(), ["log"]);
/// ```
pub trait Kind: Send + Sync + fmt::Debug + 'static {
    /// The name jobs of this kind carry (`kind`).
    fn name(&self) -> &str;

    /// Checks `payload` before a job of this kind is stored, so that a
    /// job that could never run is refused rather than left to die in
    /// its queue. The handler may check again when it runs.
    ///
    /// # Errors
    /// A [`PayloadError`] naming the JSON field from `payload` down
    /// (`payload.text`), and what is wrong with it.
    fn check(&self, payload: &Value) -> Result<(), PayloadError>;

    /// What runs jobs of this kind.
    fn handler(&self) -> Arc<dyn JobHandler>;
}

/// Kinds by name.
#[derive(Clone, Default)]
pub struct Kinds {
    by_name: BTreeMap<String, Arc<dyn Kind>>,
}

impl fmt::Debug for Kinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl Kinds {
    /// No kinds.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `kind` (replacing an earlier one of the same name).
    #[must_use]
    pub fn with(mut self, kind: impl Kind) -> Self {
        self.by_name.insert(kind.name().to_owned(), Arc::new(kind));
        self
    }

    /// The kind named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Kind>> {
        self.by_name.get(name)
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Checks `payload` for a job of kind `name`.
    ///
    /// # Errors
    /// [`Kind::check`]'s error, or one naming `kind` for a name that is
    /// not registered (listing those that are).
    pub fn check(&self, name: &str, payload: &Value) -> Result<(), PayloadError> {
        match self.by_name.get(name) {
            Some(kind) => kind.check(payload),
            None => Err(PayloadError::new(
                "kind",
                format!(
                    "unknown kind {name:?}; expected one of {}",
                    self.names().collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }

    /// Every kind's handler, by its name.
    pub fn handlers(&self) -> Handlers {
        self.by_name
            .iter()
            .fold(Handlers::new(), |h, (name, kind)| {
                h.on_shared(name.clone(), kind.handler())
            })
    }
}
