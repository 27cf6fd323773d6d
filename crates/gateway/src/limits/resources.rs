//! Limiter resource names: a model's requests are limited on its own
//! name, its tokens on `tokens:{model}`, its concurrency on
//! `inflight:{model}`; an API on `api:{name}` and `inflight:api:{name}`;
//! a tenant's session on `session:{tenant}:{thread}` (see
//! [`session_resource`]); a caller's own limits (keys and tenants of the
//! key store) under [`CALLER_PREFIX`].

/// What the resources of a caller's own limits start with (see
/// `keys/limits.rs`).
pub(crate) const CALLER_PREFIX: &str = "caller:";

/// A model's tokens resource (see the module doc).
pub(crate) fn tokens_resource(model: &str) -> String {
    format!("tokens:{model}")
}

/// The limiter resource of `tenant`'s session `thread`: sessions are the
/// tenant's own, so two tenants naming the same thread never share (or
/// drain) one. The tenant's name has `%` and `:` escaped, so the first `:`
/// after the prefix ends it.
pub(crate) fn session_resource(tenant: &str, thread: &str) -> String {
    format!(
        "{}{}{thread}",
        sluice_limit::SESSION_PREFIX,
        session_scope(tenant)
    )
}

/// `session:` then `tenant`, escaped, then `:`: what every name of
/// `tenant`'s sessions starts with.
fn session_scope(tenant: &str) -> String {
    let escaped = tenant.replace('%', "%25").replace(':', "%3A");
    format!("{escaped}:")
}

/// The session a tenant sees under the name `resource` names in its own
/// scope: `session:{thread}` → `session:{tenant}:{thread}`; other names
/// as they are.
pub(crate) fn scoped(tenant: &str, resource: &str) -> String {
    match resource.strip_prefix(sluice_limit::SESSION_PREFIX) {
        Some(thread) => session_resource(tenant, thread),
        None => resource.to_owned(),
    }
}

/// The name `tenant` knows `resource` by, or `None` for another tenant's
/// session (which it must not see).
pub(crate) fn unscoped(tenant: &str, resource: &str) -> Option<String> {
    // Per-key and per-tenant limits are the operator's: no tenant sees
    // another's (nor learns its key ids).
    if resource.starts_with(CALLER_PREFIX) {
        return None;
    }
    match resource.strip_prefix(sluice_limit::SESSION_PREFIX) {
        Some(rest) => rest
            .strip_prefix(&session_scope(tenant))
            .map(|thread| format!("{}{thread}", sluice_limit::SESSION_PREFIX)),
        None => Some(resource.to_owned()),
    }
}

/// See [`tokens_resource`].
pub(crate) fn inflight_resource(name: &str) -> String {
    format!("inflight:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_scoped_by_tenant() {
        assert_eq!(session_resource("acme", "t1"), "session:acme:t1");
        assert_eq!(scoped("acme", "session:t1"), "session:acme:t1");
        assert_eq!(scoped("acme", "openai/gpt-4o"), "openai/gpt-4o");
        assert_eq!(
            unscoped("acme", "session:acme:t1").as_deref(),
            Some("session:t1")
        );
        assert_eq!(unscoped("globex", "session:acme:t1"), None);
        assert_eq!(
            unscoped("globex", "api:slack").as_deref(),
            Some("api:slack")
        );
        // `a:b`'s thread `c` and `a`'s thread `b:c` are apart.
        assert_ne!(session_resource("a:b", "c"), session_resource("a", "b:c"));
        assert_eq!(unscoped("a", &session_resource("a:b", "c")), None);
        // A tenant cannot name its way into another's scope.
        let sneaky = scoped("globex", "session:acme:t1");
        assert_eq!(unscoped("acme", &sneaky), None);
    }
}
