//! What the store keeps: tiers, tenants and keys, their states, and the
//! requests that create and change them.

use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::error::Error;
use crate::limits::Limits;

/// A named set of limits that tenants and keys refer to: changing it
/// changes every member.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tier {
    /// Its name.
    pub name: String,
    /// Its limits.
    pub limits: Limits,
    /// Its budgets: each member (tenant or key) spends its own.
    pub budgets: Vec<Budget>,
    /// When it was created (ms since the epoch).
    pub created_at: i64,
    /// When it last changed.
    pub updated_at: i64,
}

/// Whether a tenant's keys work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantState {
    /// Its keys work.
    Active,
    /// Every key of it is refused until it is unblocked.
    Blocked,
}

/// A tenant (workspace) kept in the store.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantRecord {
    /// Its name, as requests, queues and traces know it.
    pub name: String,
    /// The tier it belongs to.
    pub tier: Option<String>,
    /// Its own limits, over its tier's; shared by all its keys.
    pub limits: Limits,
    /// Its own budgets, over its tier's; spent by all its keys together.
    pub budgets: Vec<Budget>,
    /// Free-form tags (team, cost centre).
    pub tags: Vec<String>,
    /// Active or blocked.
    pub state: TenantState,
    /// When it was created (ms since the epoch).
    pub created_at: i64,
    /// When it last changed.
    pub updated_at: i64,
}

/// Whether a key works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyState {
    /// It works.
    Active,
    /// It never works again.
    Revoked,
    /// It is refused until unblocked.
    Blocked,
    /// It was replaced; it works until its `grace_until`.
    Rotated,
}

impl KeyState {
    /// As stored and shown.
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyState::Active => "active",
            KeyState::Revoked => "revoked",
            KeyState::Blocked => "blocked",
            KeyState::Rotated => "rotated",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<KeyState> {
        Some(match s {
            "active" => KeyState::Active,
            "revoked" => KeyState::Revoked,
            "blocked" => KeyState::Blocked,
            "rotated" => KeyState::Rotated,
            _ => return None,
        })
    }
}

impl TenantState {
    /// As stored and shown.
    pub const fn as_str(self) -> &'static str {
        match self {
            TenantState::Active => "active",
            TenantState::Blocked => "blocked",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<TenantState> {
        Some(match s {
            "active" => TenantState::Active,
            "blocked" => TenantState::Blocked,
            _ => return None,
        })
    }
}

/// An API key as listed: everything but the secret, which is not kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyRecord {
    /// The public id (`sk-sluice-<id>_…`).
    pub id: String,
    /// The tenant it acts as.
    pub tenant: String,
    /// A label (`ci`, `alice's laptop`).
    pub name: Option<String>,
    /// The tier it belongs to, if other than its tenant's.
    pub tier: Option<String>,
    /// Its own limits, over its tier's; its alone.
    pub limits: Limits,
    /// Its own budgets, over its tier's; its alone.
    pub budgets: Vec<Budget>,
    /// Free-form tags.
    pub tags: Vec<String>,
    /// Its state.
    pub state: KeyState,
    /// When a rotated key stops working (ms since the epoch).
    pub grace_until: Option<i64>,
    /// The key that replaced it.
    pub replaced_by: Option<String>,
    /// When it was issued (ms since the epoch).
    pub created_at: i64,
    /// When it last changed.
    pub updated_at: i64,
}

impl KeyRecord {
    /// Whether the key itself (its tenant aside) is accepted at `now_ms`.
    ///
    /// # Errors
    /// The [`Refusal`](crate::Refusal) for its state.
    pub fn usable_at(&self, now_ms: i64) -> Result<(), crate::Refusal> {
        match self.state {
            KeyState::Active => Ok(()),
            KeyState::Revoked => Err(crate::Refusal::Revoked),
            KeyState::Blocked => Err(crate::Refusal::KeyBlocked),
            KeyState::Rotated => match self.grace_until {
                Some(until) if now_ms < until => Ok(()),
                _ => Err(crate::Refusal::Expired),
            },
        }
    }
}

/// A key just issued: `key` is the only copy of the secret.
#[derive(Clone, Serialize)]
pub struct IssuedKey {
    /// The whole key, `sk-sluice-<id>_<secret>`: show it once.
    pub key: String,
    /// What is kept of it.
    #[serde(flatten)]
    pub record: KeyRecord,
}

impl std::fmt::Debug for IssuedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedKey")
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

/// A tenant to create.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    /// Its name: 1 to 64 of `A-Z a-z 0-9 . _ -`.
    pub name: String,
    /// A tier that exists.
    #[serde(default)]
    pub tier: Option<String>,
    /// Its own limits.
    #[serde(default)]
    pub limits: Limits,
    /// Its own budgets.
    #[serde(default)]
    pub budgets: Vec<Budget>,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A key to issue.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// The tenant, which must exist.
    pub tenant: String,
    /// A label.
    #[serde(default)]
    pub name: Option<String>,
    /// A tier that exists (else the tenant's applies alone).
    #[serde(default)]
    pub tier: Option<String>,
    /// Its own limits.
    #[serde(default)]
    pub limits: Limits,
    /// Its own budgets.
    #[serde(default)]
    pub budgets: Vec<Budget>,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// Changes to a tenant or key; absent fields stay as they are. `tier:
/// null` removes the tier, `limits` and `budgets` replace the old ones
/// whole.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update {
    /// The new tier (`Some(None)`: none).
    #[serde(default, deserialize_with = "some")]
    pub tier: Option<Option<String>>,
    /// The new limits.
    #[serde(default)]
    pub limits: Option<Limits>,
    /// The new budgets.
    #[serde(default)]
    pub budgets: Option<Vec<Budget>>,
    /// The new tags.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
}

/// `null` as `Some(None)`, so that an absent field and a null differ.
fn some<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// Longest name, tag or label.
const MAX_NAME: usize = 64;
const MAX_LABEL: usize = 128;
const MAX_TAGS: usize = 32;

/// Checks a tenant or tier name.
///
/// # Errors
/// [`Error::Invalid`] naming `field`.
pub fn validate_name(field: &str, name: &str) -> Result<(), Error> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if name.is_empty() || name.len() > MAX_NAME || !name.bytes().all(ok) {
        return Err(Error::invalid(
            field,
            format!("must be 1 to {MAX_NAME} of A-Z a-z 0-9 . _ -"),
        ));
    }
    Ok(())
}

pub(crate) fn validate_label(field: &str, label: Option<&str>) -> Result<(), Error> {
    if let Some(l) = label
        && (l.is_empty() || l.len() > MAX_LABEL || l.chars().any(char::is_control))
    {
        return Err(Error::invalid(
            field,
            format!("must be 1 to {MAX_LABEL} characters without control characters"),
        ));
    }
    Ok(())
}

pub(crate) fn validate_tags(tags: &[String]) -> Result<(), Error> {
    if tags.len() > MAX_TAGS {
        return Err(Error::invalid("tags", format!("at most {MAX_TAGS}")));
    }
    for (i, t) in tags.iter().enumerate() {
        if t.is_empty() || t.len() > MAX_NAME || t.chars().any(char::is_control) {
            return Err(Error::invalid(
                format!("tags[{i}]"),
                format!("must be 1 to {MAX_NAME} characters without control characters"),
            ));
        }
    }
    Ok(())
}
