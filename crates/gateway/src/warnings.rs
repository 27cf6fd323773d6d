//! What is unsafe about a configuration that is nonetheless allowed: said
//! loudly at start-up (logged as warnings) and kept in `/readyz`'s detail,
//! so that whoever runs or probes the gateway sees it.

use std::net::{IpAddr, SocketAddr};

use crate::config::Config;

/// The warnings for `config` served on `listen`, each one sentence;
/// `store_tenants` says whether the key store holds tenants (then callers
/// need keys, as with `[[tenants]]`).
pub fn startup_warnings(config: &Config, listen: SocketAddr, store_tenants: bool) -> Vec<String> {
    let mut out = Vec::new();
    if config.tenants.is_empty() && !store_tenants {
        out.push(
            "no [[tenants]] are configured, nor tenants in the key store: there is no authentication. Every caller is trusted, \
             names its own workspace with x-sluice-workspace, can read and cancel any workspace's \
             jobs, join another's in-flight requests and spend this server's provider keys. \
             Configure [[tenants]] (or create a tenant and keys: sluice tenants, sluice keys) before anyone else can reach this port"
                .to_owned(),
        );
        if !listen.ip().is_loopback() {
            out.push(format!(
                "listening on {listen}, which is not loopback, with no [[tenants]]: anyone who can \
                 reach it uses it as its own"
            ));
        }
    }
    out.extend(crate::credentials::missing_keys_warning(config));
    for p in &config.providers {
        if let Some(host) = plain_remote(&p.base_url) {
            out.push(format!(
                "provider {:?} is reached over plain http:// at {host}: its API key and every \
                 prompt cross the network unencrypted",
                p.name
            ));
        }
    }
    for a in &config.apis {
        if let Some(host) = plain_remote(&a.base_url) {
            out.push(format!(
                "API {:?} is reached over plain http:// at {host}: its token and every call \
                 cross the network unencrypted",
                a.name
            ));
        }
    }
    out
}

/// The host of a plain `http://` URL that is not loopback.
fn plain_remote(base_url: &str) -> Option<String> {
    let url = url::Url::parse(base_url).ok()?;
    if url.scheme() != "http" {
        return None;
    }
    let host = url.host_str()?.to_owned();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!loopback).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TenantConfig;

    const LOCAL: &str = "127.0.0.1:8080";

    /// The embedded defaults with every provider's key set.
    fn keyed() -> Config {
        let mut c = Config::default();
        for var in c
            .providers
            .clone()
            .into_iter()
            .filter_map(|p| p.api_key_env)
        {
            c.secrets.insert(var, "k");
        }
        c
    }

    #[test]
    fn an_open_gateway_says_so() {
        let c = keyed();
        let w = startup_warnings(&c, LOCAL.parse().unwrap(), false);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("no [[tenants]]"));
        let w = startup_warnings(&c, "0.0.0.0:8080".parse().unwrap(), false);
        assert_eq!(w.len(), 2, "{w:?}");
    }

    #[test]
    fn store_tenants_count_as_tenants() {
        let c = keyed();
        assert!(!startup_warnings(&c, LOCAL.parse().unwrap(), false).is_empty());
        assert!(startup_warnings(&c, "0.0.0.0:8080".parse().unwrap(), true).is_empty());
    }

    #[test]
    fn tenants_and_https_say_nothing() {
        let mut c = keyed();
        c.tenants.push(TenantConfig::new("acme", "k"));
        assert!(startup_warnings(&c, "0.0.0.0:8080".parse().unwrap(), false).is_empty());
        c.providers[0].base_url = "http://10.0.0.7:9000/v1".into();
        c.apis[0].base_url = "http://localhost:9090/x".into();
        let w = startup_warnings(&c, LOCAL.parse().unwrap(), false);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("10.0.0.7"), "{w:?}");
    }

    #[test]
    fn providers_without_their_key_are_named_with_their_variable_in_one_warning() {
        let mut c = keyed();
        c.tenants.push(TenantConfig::new("acme", "k"));
        c.secrets = Default::default();
        c.secrets.insert("OPENAI_API_KEY", "k");
        c.providers[1].auth = crate::config::ProviderAuth::None;
        let w = startup_warnings(&c, LOCAL.parse().unwrap(), false);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(!w[0].contains("openai ("), "{w:?}");
        assert!(!w[0].contains(&c.providers[1].name), "auth = none: {w:?}");
        assert!(w[0].contains("google (GEMINI_API_KEY is not set)"), "{w:?}");
    }

    #[test]
    fn loopback_hosts() {
        for u in [
            "http://127.0.0.1:1",
            "http://[::1]:1/x",
            "http://LOCALHOST/",
            "https://x.com",
        ] {
            assert_eq!(plain_remote(u), None, "{u}");
        }
        assert_eq!(
            plain_remote("http://api.example.com/v1").as_deref(),
            Some("api.example.com")
        );
    }
}
