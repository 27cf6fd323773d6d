//! The registry of APIs an `http` job may call: name → base URL and how to
//! authenticate. Jobs name an API; they never carry a URL.

use std::collections::BTreeMap;

use crate::{Credentials, Secret};

/// One configured API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpApi {
    /// Where its paths are appended, without a trailing `/`, e.g.
    /// `https://slack.com`.
    pub base_url: String,
    /// The header that carries a credential, chosen by the job's tenant.
    pub auth: Option<AuthHeader>,
}

/// A header carrying the credential of the job's tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthHeader {
    /// The header, e.g. `Authorization`.
    pub header: String,
    /// Put before the credential, e.g. `Bearer `.
    pub prefix: String,
    /// The credentials: tenants' own and a shared one.
    pub credentials: Credentials,
}

/// A base URL that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "api {api:?}: base URL {url:?} must start with http:// or https:// and have no query or fragment"
)]
pub struct InvalidBaseUrl {
    /// The API.
    pub api: String,
    /// The URL given.
    pub url: String,
}

/// APIs by name.
///
/// ```
/// use sluice_jobs_http::http::HttpApis;
///
/// let apis = HttpApis::new()
///     .api("slack", "https://slack.com/")?
///     .bearer_from_env("slack", "SLACK_TOKEN");
/// assert_eq!(apis.get("slack").unwrap().base_url, "https://slack.com");
/// # Ok::<(), sluice_jobs_http::http::InvalidBaseUrl>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpApis {
    apis: BTreeMap<String, HttpApi>,
}

impl HttpApis {
    /// No APIs.
    pub fn new() -> Self {
        Self::default()
    }

    /// The seed's APIs at their public base URLs, each with a bearer token
    /// from `{NAME}_TOKEN` (`SLACK_TOKEN`, `GITHUB_TOKEN`, …; Discord's is
    /// `Bot {DISCORD_BOT_TOKEN}`).
    pub fn seed() -> Self {
        let apis = [
            ("slack", "https://slack.com"),
            ("github", "https://api.github.com"),
            ("gmail", "https://gmail.googleapis.com"),
            ("google_calendar", "https://www.googleapis.com/calendar/v3"),
            ("google_sheets", "https://sheets.googleapis.com"),
            ("google_drive", "https://www.googleapis.com/drive/v3"),
            ("linear", "https://api.linear.app"),
            ("clickup", "https://api.clickup.com"),
        ];
        let mut out = HttpApis::new();
        for (name, url) in apis {
            out.apis.insert(
                name.to_owned(),
                HttpApi {
                    base_url: url.to_owned(),
                    auth: Some(AuthHeader {
                        header: "Authorization".to_owned(),
                        prefix: "Bearer ".to_owned(),
                        credentials: Credentials::shared(Secret::env(format!(
                            "{}_TOKEN",
                            name.to_ascii_uppercase()
                        ))),
                    }),
                },
            );
        }
        out.apis.insert(
            "discord".to_owned(),
            HttpApi {
                base_url: "https://discord.com/api/v10".to_owned(),
                auth: Some(AuthHeader {
                    header: "Authorization".to_owned(),
                    prefix: "Bot ".to_owned(),
                    credentials: Credentials::shared(Secret::env("DISCORD_BOT_TOKEN")),
                }),
            },
        );
        out
    }

    /// Adds (or replaces) `name` at `base_url`, without authentication.
    ///
    /// # Errors
    /// [`InvalidBaseUrl`] unless it is an `http(s)://` URL without query or fragment.
    pub fn api(mut self, name: &str, base_url: &str) -> Result<Self, InvalidBaseUrl> {
        let ok = (base_url.starts_with("http://") || base_url.starts_with("https://"))
            && !base_url.contains(['?', '#', ' '])
            && reqwest::Url::parse(base_url).is_ok();
        if !ok {
            return Err(InvalidBaseUrl {
                api: name.to_owned(),
                url: base_url.to_owned(),
            });
        }
        let api = HttpApi {
            base_url: base_url.trim_end_matches('/').to_owned(),
            auth: None,
        };
        self.apis.insert(name.to_owned(), api);
        Ok(self)
    }

    /// Sends `header: {prefix}{credential}` on every call to `name` (if
    /// configured), the credential chosen by the job's tenant.
    #[must_use]
    pub fn auth(
        mut self,
        name: &str,
        header: &str,
        prefix: &str,
        credentials: Credentials,
    ) -> Self {
        if let Some(api) = self.apis.get_mut(name) {
            api.auth = Some(AuthHeader {
                header: header.to_owned(),
                prefix: prefix.to_owned(),
                credentials,
            });
        }
        self
    }

    /// Sends `header: {prefix}{$env}` on every call to `name`, whatever
    /// the tenant.
    #[must_use]
    pub fn auth_from_env(self, name: &str, header: &str, prefix: &str, env: &str) -> Self {
        self.auth(name, header, prefix, Credentials::shared(Secret::env(env)))
    }

    /// Sends `Authorization: Bearer {$env}` on every call to `name`.
    #[must_use]
    pub fn bearer_from_env(self, name: &str, env: &str) -> Self {
        self.auth_from_env(name, "Authorization", "Bearer ", env)
    }

    /// The API called `name`.
    pub fn get(&self, name: &str) -> Option<&HttpApi> {
        self.apis.get(name)
    }

    /// The configured names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.apis.keys().map(String::as_str)
    }
}
