//! The store's operations, written once against [`Conn`]: each runs inside
//! one transaction that the caller commits.

use std::time::Duration;

use crate::budget::{Budget, validate_budgets};
use crate::db::{Conn, StoredKey, args};
use crate::error::Error;
use crate::limits::Limits;
use crate::model::{
    IssuedKey, KeyRecord, KeyState, NewKey, NewTenant, TenantRecord, TenantState, Tier, Update,
    validate_label, validate_name, validate_tags,
};
use crate::secret::NewSecret;
use crate::sql;

/// The longest grace a rotated key may get.
pub const MAX_GRACE: Duration = Duration::from_secs(30 * 86_400);

fn json<T: serde::Serialize>(v: &T) -> String {
    // Limits and tag lists are plain data: serializing them cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

fn first<T>(rows: Vec<T>) -> Option<T> {
    rows.into_iter().next()
}

pub(crate) async fn create_tier<C: Conn>(
    c: &mut C,
    name: &str,
    limits: &Limits,
    budgets: &[Budget],
    now: i64,
) -> Result<Tier, Error> {
    validate_name("name", name)?;
    limits.validate("limits")?;
    validate_budgets("budgets", budgets)?;
    let rows = c
        .tiers(
            sql::INSERT_TIER,
            args![name, json(limits), now, json(&budgets)],
        )
        .await?;
    first(rows).ok_or_else(|| Error::Conflict {
        what: "tier",
        name: name.to_owned(),
    })
}

/// Replaces the limits and/or the budgets of tier `name` (`None`: as
/// they are).
pub(crate) async fn update_tier<C: Conn>(
    c: &mut C,
    name: &str,
    limits: Option<&Limits>,
    budgets: Option<&[Budget]>,
    now: i64,
) -> Result<Tier, Error> {
    let cur = tier(c, name).await?.ok_or_else(|| Error::NotFound {
        what: "tier",
        name: name.to_owned(),
    })?;
    let limits = limits.unwrap_or(&cur.limits);
    let budgets = budgets.unwrap_or(&cur.budgets);
    limits.validate("limits")?;
    validate_budgets("budgets", budgets)?;
    let rows = c
        .tiers(
            sql::UPDATE_TIER,
            args![name, json(limits), now, json(&budgets)],
        )
        .await?;
    first(rows).ok_or_else(|| Error::NotFound {
        what: "tier",
        name: name.to_owned(),
    })
}

pub(crate) async fn tier<C: Conn>(c: &mut C, name: &str) -> Result<Option<Tier>, Error> {
    Ok(first(c.tiers(sql::GET_TIER, args![name]).await?))
}

/// Refuses a tier that does not exist, naming `field`.
async fn check_tier<C: Conn>(c: &mut C, field: &str, tier: Option<&str>) -> Result<(), Error> {
    if let Some(t) = tier
        && self::tier(c, t).await?.is_none()
    {
        return Err(Error::invalid(field, format!("no tier named {t:?}")));
    }
    Ok(())
}

pub(crate) async fn create_tenant<C: Conn>(
    c: &mut C,
    new: &NewTenant,
    now: i64,
) -> Result<TenantRecord, Error> {
    validate_name("name", &new.name)?;
    new.limits.validate("limits")?;
    validate_budgets("budgets", &new.budgets)?;
    validate_tags(&new.tags)?;
    check_tier(c, "tier", new.tier.as_deref()).await?;
    let rows = c
        .tenants(
            sql::INSERT_TENANT,
            args![
                new.name.as_str(),
                new.tier.as_deref(),
                json(&new.limits),
                json(&new.tags),
                now,
                json(&new.budgets)
            ],
        )
        .await?;
    first(rows).ok_or_else(|| Error::Conflict {
        what: "tenant",
        name: new.name.clone(),
    })
}

pub(crate) async fn tenant<C: Conn>(c: &mut C, name: &str) -> Result<Option<TenantRecord>, Error> {
    Ok(first(c.tenants(sql::GET_TENANT, args![name]).await?))
}

async fn existing_tenant<C: Conn>(c: &mut C, name: &str) -> Result<TenantRecord, Error> {
    tenant(c, name).await?.ok_or_else(|| Error::NotFound {
        what: "tenant",
        name: name.to_owned(),
    })
}

pub(crate) async fn update_tenant<C: Conn>(
    c: &mut C,
    name: &str,
    update: &Update,
    now: i64,
) -> Result<TenantRecord, Error> {
    let cur = existing_tenant(c, name).await?;
    let a = apply(update, cur.tier, cur.limits, cur.budgets, cur.tags)?;
    check_tier(c, "tier", a.tier.as_deref()).await?;
    let rows = c
        .tenants(
            sql::UPDATE_TENANT,
            args![
                name,
                a.tier,
                json(&a.limits),
                json(&a.tags),
                now,
                json(&a.budgets)
            ],
        )
        .await?;
    first(rows).ok_or_else(|| Error::NotFound {
        what: "tenant",
        name: name.to_owned(),
    })
}

/// A tenant's or key's fields after an [`Update`].
struct Applied {
    tier: Option<String>,
    limits: Limits,
    budgets: Vec<Budget>,
    tags: Vec<String>,
}

/// The fields of `update` over the current ones, checked.
fn apply(
    update: &Update,
    tier: Option<String>,
    limits: Limits,
    budgets: Vec<Budget>,
    tags: Vec<String>,
) -> Result<Applied, Error> {
    let a = Applied {
        tier: update.tier.clone().unwrap_or(tier),
        limits: update.limits.clone().unwrap_or(limits),
        budgets: update.budgets.clone().unwrap_or(budgets),
        tags: update.tags.clone().unwrap_or(tags),
    };
    a.limits.validate("limits")?;
    validate_budgets("budgets", &a.budgets)?;
    validate_tags(&a.tags)?;
    Ok(a)
}

/// Moves tenant `name` to `to`; already there is not an error.
pub(crate) async fn set_tenant_state<C: Conn>(
    c: &mut C,
    name: &str,
    to: TenantState,
    now: i64,
) -> Result<TenantRecord, Error> {
    let cur = existing_tenant(c, name).await?;
    if cur.state == to {
        return Ok(cur);
    }
    let rows = c
        .tenants(
            sql::SET_TENANT_STATE,
            args![name, to.as_str(), cur.state.as_str(), now],
        )
        .await?;
    // Empty only if a concurrent change moved it first: that one stands.
    match first(rows) {
        Some(t) => Ok(t),
        None => existing_tenant(c, name).await,
    }
}

pub(crate) async fn issue_key<C: Conn>(
    c: &mut C,
    new: &NewKey,
    now: i64,
) -> Result<IssuedKey, Error> {
    validate_label("name", new.name.as_deref())?;
    new.limits.validate("limits")?;
    validate_budgets("budgets", &new.budgets)?;
    validate_tags(&new.tags)?;
    existing_tenant(c, &new.tenant).await?;
    check_tier(c, "tier", new.tier.as_deref()).await?;
    insert_key(c, new, now).await
}

async fn insert_key<C: Conn>(c: &mut C, new: &NewKey, now: i64) -> Result<IssuedKey, Error> {
    // 48 random bits of id: a collision is all but impossible, and is
    // answered by drawing again rather than by an error.
    for _ in 0..3 {
        let secret = NewSecret::generate()?;
        let rows = c
            .keys(
                sql::INSERT_KEY,
                args![
                    secret.id.as_str(),
                    new.tenant.as_str(),
                    secret.hash.as_str(),
                    new.name.as_deref(),
                    new.tier.as_deref(),
                    json(&new.limits),
                    json(&new.tags),
                    now,
                    json(&new.budgets)
                ],
            )
            .await?;
        if let Some(k) = first(rows) {
            return Ok(IssuedKey {
                key: secret.key,
                record: k.record,
            });
        }
    }
    Err(Error::Random("three key ids in a row were taken".into()))
}

pub(crate) async fn stored_key<C: Conn>(c: &mut C, id: &str) -> Result<Option<StoredKey>, Error> {
    Ok(first(c.keys(sql::GET_KEY, args![id]).await?))
}

async fn existing_key<C: Conn>(c: &mut C, id: &str) -> Result<KeyRecord, Error> {
    match stored_key(c, id).await? {
        Some(k) => Ok(k.record),
        None => Err(Error::NotFound {
            what: "key",
            name: id.to_owned(),
        }),
    }
}

/// Deletes key `id`, whatever its state.
pub(crate) async fn delete_key<C: Conn>(c: &mut C, id: &str) -> Result<KeyRecord, Error> {
    match first(c.keys(sql::DELETE_KEY, args![id]).await?) {
        Some(k) => Ok(k.record),
        None => Err(Error::NotFound {
            what: "key",
            name: id.to_owned(),
        }),
    }
}

/// Deletes tenant `name` and every key of it, in one transaction.
pub(crate) async fn delete_tenant<C: Conn>(
    c: &mut C,
    name: &str,
) -> Result<(TenantRecord, Vec<KeyRecord>), Error> {
    let tenant = existing_tenant(c, name).await?;
    let keys = c.keys(sql::DELETE_TENANT_KEYS, args![name]).await?;
    // Empty only if a concurrent delete took it first: that one stands.
    if first(c.tenants(sql::DELETE_TENANT, args![name]).await?).is_none() {
        return Err(Error::NotFound {
            what: "tenant",
            name: name.to_owned(),
        });
    }
    Ok((tenant, keys.into_iter().map(|k| k.record).collect()))
}

pub(crate) async fn keys<C: Conn>(
    c: &mut C,
    tenant: Option<&str>,
) -> Result<Vec<KeyRecord>, Error> {
    let rows = match tenant {
        Some(t) => c.keys(sql::LIST_TENANT_KEYS, args![t]).await?,
        None => c.keys(sql::LIST_KEYS, args![]).await?,
    };
    Ok(rows.into_iter().map(|k| k.record).collect())
}

pub(crate) async fn update_key<C: Conn>(
    c: &mut C,
    id: &str,
    update: &Update,
    now: i64,
) -> Result<KeyRecord, Error> {
    let cur = existing_key(c, id).await?;
    let a = apply(update, cur.tier, cur.limits, cur.budgets, cur.tags)?;
    check_tier(c, "tier", a.tier.as_deref()).await?;
    let rows = c
        .keys(
            sql::UPDATE_KEY,
            args![
                id,
                a.tier,
                json(&a.limits),
                json(&a.tags),
                now,
                json(&a.budgets)
            ],
        )
        .await?;
    match first(rows) {
        Some(k) => Ok(k.record),
        None => existing_key(c, id).await,
    }
}

/// Issues a key like `id` (tenant, label, tier, limits, budgets, tags)
/// and lets
/// `id` work for `grace` more.
pub(crate) async fn rotate_key<C: Conn>(
    c: &mut C,
    id: &str,
    grace: Duration,
    now: i64,
) -> Result<(IssuedKey, KeyRecord), Error> {
    if grace > MAX_GRACE {
        return Err(Error::invalid(
            "grace_seconds",
            format!("at most {}", MAX_GRACE.as_secs()),
        ));
    }
    let old = existing_key(c, id).await?;
    if old.state != KeyState::Active {
        return Err(wrong_state(&old, "rotate"));
    }
    let like = NewKey {
        tenant: old.tenant.clone(),
        name: old.name.clone(),
        tier: old.tier.clone(),
        limits: old.limits.clone(),
        budgets: old.budgets.clone(),
        tags: old.tags.clone(),
    };
    let new = insert_key(c, &like, now).await?;
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let rows = c
        .keys(
            sql::SET_KEY_STATE,
            args![
                id,
                KeyState::Rotated.as_str(),
                KeyState::Active.as_str(),
                now,
                Some(now.saturating_add(grace_ms)),
                new.record.id.as_str()
            ],
        )
        .await?;
    // Empty if a concurrent change moved the old key first: the whole
    // rotation is rolled back with the error.
    let old = match first(rows) {
        Some(k) => k.record,
        None => return Err(wrong_state(&existing_key(c, id).await?, "rotate")),
    };
    Ok((new, old))
}

/// Moves key `id` to `to` from one of `from`; already at `to` is not an
/// error.
pub(crate) async fn set_key_state<C: Conn>(
    c: &mut C,
    id: &str,
    to: KeyState,
    from: &[KeyState],
    action: &'static str,
    now: i64,
) -> Result<KeyRecord, Error> {
    let cur = existing_key(c, id).await?;
    if cur.state == to {
        return Ok(cur);
    }
    if !from.contains(&cur.state) {
        return Err(wrong_state(&cur, action));
    }
    let rows = c
        .keys(
            sql::SET_KEY_STATE,
            args![
                id,
                to.as_str(),
                cur.state.as_str(),
                now,
                cur.grace_until,
                cur.replaced_by
            ],
        )
        .await?;
    match first(rows) {
        Some(k) => Ok(k.record),
        None => Err(wrong_state(&existing_key(c, id).await?, action)),
    }
}

fn wrong_state(k: &KeyRecord, action: &'static str) -> Error {
    Error::WrongState {
        what: "key",
        name: k.id.clone(),
        state: k.state.as_str(),
        action,
    }
}
