//! Which job kinds exist and whether a payload suits its kind.
//!
//! Until `sluice-jobs` exports its kinds, this checks the names the issue
//! fixes (`http` and the seven Discord operations) and that a payload is a
//! JSON object; field-level checks come with the kinds themselves.

use serde_json::Value;

/// Every kind a worker can run.
pub(crate) const KINDS: &[&str] = &[
    "http",
    "discord.create_role",
    "discord.delete_role",
    "discord.assign_role",
    "discord.remove_role",
    "discord.create_channel",
    "discord.delete_channel",
    "discord.update_permissions",
];

/// What is wrong with a payload: the field under `payload` (empty for the
/// payload itself) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) field: String,
    pub(crate) message: String,
}

/// Checks `payload` for `kind` (a kind in [`KINDS`]).
pub(crate) fn validate(_kind: &str, payload: &Value) -> Result<(), Problem> {
    if payload.is_object() {
        Ok(())
    } else {
        Err(Problem {
            field: String::new(),
            message: "must be a JSON object".into(),
        })
    }
}
