//! The statements, one text for both backends (both take `$n`, `ON
//! CONFLICT … DO NOTHING` and `RETURNING`). Every state change names the
//! state it starts from in its `WHERE`, so that two concurrent changes
//! cannot both apply.

pub(crate) const INSERT_TIER: &str = "INSERT INTO tiers \
    (name, limits, budgets, created_at, updated_at) \
    VALUES ($1, $2, $4, $3, $3) ON CONFLICT (name) DO NOTHING RETURNING *";
pub(crate) const UPDATE_TIER: &str =
    "UPDATE tiers SET limits = $2, updated_at = $3, budgets = $4 WHERE name = $1 RETURNING *";
pub(crate) const GET_TIER: &str = "SELECT * FROM tiers WHERE name = $1";
pub(crate) const LIST_TIERS: &str = "SELECT * FROM tiers ORDER BY name";

pub(crate) const INSERT_TENANT: &str = "INSERT INTO tenants \
    (name, tier, limits, tags, state, created_at, updated_at, budgets) \
    VALUES ($1, $2, $3, $4, 'active', $5, $5, $6) ON CONFLICT (name) DO NOTHING RETURNING *";
pub(crate) const UPDATE_TENANT: &str = "UPDATE tenants \
    SET tier = $2, limits = $3, tags = $4, updated_at = $5, budgets = $6 \
    WHERE name = $1 RETURNING *";
/// Tenant `$1` from state `$3` to `$2`.
pub(crate) const SET_TENANT_STATE: &str = "UPDATE tenants \
    SET state = $2, updated_at = $4 WHERE name = $1 AND state = $3 RETURNING *";
pub(crate) const GET_TENANT: &str = "SELECT * FROM tenants WHERE name = $1";
pub(crate) const LIST_TENANTS: &str = "SELECT * FROM tenants ORDER BY name";

pub(crate) const INSERT_KEY: &str = "INSERT INTO api_keys \
    (id, tenant, hash, name, tier, limits, tags, state, created_at, updated_at, budgets) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'active', $8, $8, $9) \
    ON CONFLICT (id) DO NOTHING RETURNING *";
pub(crate) const UPDATE_KEY: &str = "UPDATE api_keys \
    SET tier = $2, limits = $3, tags = $4, updated_at = $5, budgets = $6 \
    WHERE id = $1 RETURNING *";
/// Key `$1` from state `$3` to `$2`, with `grace_until` `$5` and
/// `replaced_by` `$6`.
pub(crate) const SET_KEY_STATE: &str = "UPDATE api_keys \
    SET state = $2, updated_at = $4, grace_until = $5, replaced_by = $6 \
    WHERE id = $1 AND state = $3 RETURNING *";
pub(crate) const GET_KEY: &str = "SELECT * FROM api_keys WHERE id = $1";
pub(crate) const DELETE_KEY: &str = "DELETE FROM api_keys WHERE id = $1 RETURNING *";
pub(crate) const DELETE_TENANT_KEYS: &str = "DELETE FROM api_keys WHERE tenant = $1 RETURNING *";
pub(crate) const DELETE_TENANT: &str = "DELETE FROM tenants WHERE name = $1 RETURNING *";
pub(crate) const LIST_KEYS: &str = "SELECT * FROM api_keys ORDER BY tenant, created_at, id";
pub(crate) const LIST_TENANT_KEYS: &str =
    "SELECT * FROM api_keys WHERE tenant = $1 ORDER BY created_at, id";
