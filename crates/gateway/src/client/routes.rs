//! The route of every configured upstream, decided once when the state
//! is built: a provider's calls go to its `base_url` with a path after
//! it, an API's to its `base_url` with the client's path, so their
//! scheme and host — all the proxy settings look at — are the base
//! URL's.

use std::collections::HashMap;

use axum::http::Uri;
use foldhash::fast::RandomState;

use super::{Route, UpstreamClient};
use crate::config::Config;

/// See the module doc. A base URL that does not parse has no route here:
/// its requests are decided when sent, as before.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    /// In the order of `config.providers`.
    providers: Vec<Option<Route>>,
    /// By API name (the configuration's, fixed at start).
    apis: HashMap<String, Option<Route>, RandomState>,
}

impl Routes {
    /// The routes of `config`'s providers and APIs through `client`.
    pub(crate) fn new(config: &Config, client: &UpstreamClient) -> Self {
        // Parsed as a request's URL is (as a `Url`, then a `Uri`), so
        // that the host is normalized the same way.
        let of = |base: &str| {
            let url = reqwest::Url::parse(base).ok()?;
            let uri = Uri::try_from(url.as_str()).ok()?;
            Some(client.route(&uri))
        };
        Routes {
            providers: config.providers.iter().map(|p| of(&p.base_url)).collect(),
            apis: (config.apis.iter())
                .map(|a| (a.name.clone(), of(&a.base_url)))
                .collect(),
        }
    }

    /// The route of the provider at `index` in `config.providers`.
    pub(crate) fn provider(&self, index: usize) -> Option<Route> {
        self.providers.get(index).copied().flatten()
    }

    /// The route of the API `name`.
    pub(crate) fn api(&self, name: &str) -> Option<Route> {
        self.apis.get(name).copied().flatten()
    }
}
