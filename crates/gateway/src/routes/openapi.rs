//! `GET /openapi.json`: an OpenAPI 3.1 description of every route the
//! router serves, made from the router's own table (method, path, owner:
//! [`super::owners`]) and from docs/gateway.md's row for each route (its
//! description), with the JSON bodies of the gateway's own API as
//! schemas. Tests check that every route of the table is described and
//! that each schema names exactly the fields its Rust type takes, so the
//! description cannot fall behind the router or the types.
//!
//! The model routes (`/v1/chat/completions`, `/v1/messages`, Gemini's)
//! take the providers' own bodies, described by their providers; they
//! are referenced by name here rather than copied.

use std::sync::OnceLock;

use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use sluice_keys::{Limits, NewKey, NewTenant, Update};

use crate::layers::auth::Owner;
use crate::layers::grants::AcquireBody;
use crate::routes::jobs::{Batch, JobSpec, ScheduleSpec};
use crate::routes::limits::{ReleaseBody, ReportBody, SetBody};
use crate::routes::tenants::{NewTier, TierUpdate};
use crate::routes::{RouteOwner, owners};

/// The route table of docs/gateway.md, where each route's description is
/// written once for people and for this document.
const DOCS: &str = include_str!("../../../../docs/gateway.md");

/// `GET /openapi.json`: the document, serialized once (an anonymous
/// caller asking again costs a copy of bytes, not of the whole tree).
pub(crate) async fn get() -> Response {
    static SPEC: OnceLock<axum::body::Bytes> = OnceLock::new();
    let body = SPEC.get_or_init(|| {
        serde_json::to_vec(&spec(&owners(), DOCS))
            .unwrap_or_default()
            .into()
    });
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.clone(),
    )
        .into_response()
}

/// A route's row in the docs: (`METHOD /path`, owner, description).
fn rows(docs: &str) -> Vec<(&str, &str, &str)> {
    docs.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("| `")?;
            let (route, rest) = rest.split_once("` | ")?;
            let (owner, rest) = rest.split_once(" | ")?;
            let desc = rest.strip_suffix('|').unwrap_or(rest).trim();
            route.contains(' ').then_some((route, owner, desc))
        })
        .collect()
}

/// The description of `method path` in `docs`.
fn described<'d>(rows: &[(&str, &str, &'d str)], method: &str, path: &str) -> Option<&'d str> {
    let route = format!("{method} {path}");
    rows.iter()
        .find(|(r, _, _)| *r == route)
        .map(|(_, _, d)| *d)
}

/// The document for `routes`, described by `docs`.
pub(crate) fn spec(routes: &[RouteOwner], docs: &str) -> Value {
    let rows = rows(docs);
    let mut paths = Map::new();
    for r in routes {
        let method = r.method.as_ref().map_or("ANY", |m| m.as_str());
        let desc = described(&rows, method, r.path).unwrap_or("");
        let (path, params) = openapi_path(r.path);
        let methods: &[&str] = match method {
            "ANY" => &["get", "post", "put", "patch", "delete"],
            m => &[m],
        };
        let item = paths
            .entry(path.clone())
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a path item is an object");
        for m in methods {
            let m = m.to_ascii_lowercase();
            item.insert(m.clone(), operation(&m, r, &path, &params, desc));
        }
    }
    let mut schemas = Map::new();
    schemas.insert("Error".into(), error_schema());
    for b in bodies() {
        schemas.insert(b.name.into(), (b.schema)());
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Sluice",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Traffic control for AI agents: model calls in OpenAI, Anthropic and \
                Gemini formats, proxied API and MCP tool calls, limits, jobs, usage and the \
                operator's API. Each operation says who may call it (its security) and is \
                described as in docs/gateway.md.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "tenantKey": {"type": "http", "scheme": "bearer",
                    "description": "A tenant's Sluice key (`Authorization: Bearer`)."},
                "tenantApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key",
                    "description": "A tenant's Sluice key, as the Anthropic SDK sends it."},
                "tenantGoogApiKey": {"type": "apiKey", "in": "header", "name": "x-goog-api-key",
                    "description": "A tenant's Sluice key, as the google-genai SDK sends it."},
                "tenantQueryKey": {"type": "apiKey", "in": "query", "name": "key",
                    "description": "A tenant's Sluice key in the query, as Gemini clients may send it."},
                "adminToken": {"type": "http", "scheme": "bearer",
                    "description": "The operator's `admin_token`."},
                "viewerToken": {"type": "http", "scheme": "bearer",
                    "description": "`ui.token` or `admin_token` (or a dashboard session cookie)."},
                "scraperToken": {"type": "http", "scheme": "bearer",
                    "description": "`metrics.token` or `admin_token`."},
            },
        },
    })
}

/// `/v1/models/{*rest}` as OpenAPI writes it (`{rest}`), and its path
/// parameters.
fn openapi_path(path: &str) -> (String, Vec<String>) {
    let mut params = Vec::new();
    let segments: Vec<String> = path
        .split('/')
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => {
                    let name = name.trim_start_matches('*');
                    params.push(name.to_owned());
                    format!("{{{name}}}")
                }
                None => s.to_owned(),
            },
        )
        .collect();
    (segments.join("/"), params)
}

/// Who may call a route, as OpenAPI's security requirements (any one).
fn security(owner: Owner) -> Value {
    match owner {
        Owner::Anyone => json!([]),
        Owner::Tenant => json!([
            {"tenantKey": []}, {"tenantApiKey": []}, {"tenantGoogApiKey": []}, {"tenantQueryKey": []}
        ]),
        Owner::Admin => json!([{"adminToken": []}]),
        Owner::Viewer => json!([{"viewerToken": []}]),
        Owner::Scraper => json!([{"scraperToken": []}]),
    }
}

/// A tag per part of the API, from the path.
fn tag(path: &str) -> &'static str {
    const TAGS: &[(&str, &str)] = &[
        ("/v1/limits", "limits"),
        ("/v1/jobs", "jobs"),
        ("/v1/flows", "jobs"),
        ("/v1/schedules", "jobs"),
        ("/v1/queues", "jobs"),
        ("/v1/tenants", "admin"),
        ("/v1/keys", "admin"),
        ("/v1/tiers", "admin"),
        ("/v1/audit", "admin"),
        ("/v1/cache", "cache"),
        ("/v1/usage", "usage"),
        ("/v1/requests", "usage"),
        ("/v1/dashboard", "dashboard"),
        ("/ui", "dashboard"),
        ("/proxy", "proxy"),
        ("/mcp", "mcp"),
        ("/metrics", "operations"),
        ("/health", "operations"),
        ("/readyz", "operations"),
        ("/openapi.json", "operations"),
    ];
    TAGS.iter()
        .find(|(prefix, _)| path.starts_with(prefix))
        .map_or("models", |(_, t)| t)
}

fn operation(method: &str, r: &RouteOwner, path: &str, params: &[String], desc: &str) -> Value {
    let id: String = format!("{method}{path}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut op = json!({
        "operationId": id.trim_end_matches('_'),
        "summary": summary(desc),
        "description": desc,
        "tags": [tag(path)],
        "security": security(r.owner),
        "responses": {
            "200": {"description": "Done; see the description for the answer's shape."},
            "4XX": {"description": "Refused: the error names the field, header or limit.",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
            "5XX": {"description": "The gateway or an upstream could not answer.",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        },
    });
    if !params.is_empty() {
        op["parameters"] = params
            .iter()
            .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
    }
    if let Some(b) = bodies().iter().find(|b| {
        b.routes
            .iter()
            .any(|(m, p)| m.eq_ignore_ascii_case(method) && *p == r.path)
    }) {
        op["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{}", b.name)}}},
        });
    } else if matches!(method, "post" | "put" | "patch") {
        op["requestBody"] = json!({
            "required": false,
            "content": {"application/json": {"schema": {"type": "object"}}},
        });
    }
    op
}

/// The first sentence of a description, markdown left as is, at most
/// 120 bytes.
fn summary(desc: &str) -> String {
    let first = desc.split("; ").next().unwrap_or(desc);
    let first = first.split(". ").next().unwrap_or(first);
    if first.len() <= 120 {
        return first.to_owned();
    }
    let mut end = 117;
    while !first.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &first[..end])
}

fn error_schema() -> Value {
    json!({
        "type": "object",
        "required": ["error"],
        "properties": {"error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string", "description": "What went wrong, naming the field, header or limit."},
                "type": {"type": "string", "description": "The kind of error, in OpenAI's words (`invalid_request_error`, `rate_limit_error`, ...)."},
                "code": {"type": ["string", "null"], "description": "A stable code (`provider_not_configured`, ...)."},
                "param": {"type": ["string", "null"], "description": "The field at fault, when one is."},
            },
        }},
    })
}

/// A JSON body of the gateway's own API: its schema, the routes that take
/// it, and the fields its Rust type takes (for the tests).
pub(crate) struct BodyDoc {
    pub name: &'static str,
    pub routes: &'static [(&'static str, &'static str)],
    pub schema: fn() -> Value,
    /// The error the type gives for an unknown field: serde lists every
    /// field the type takes in it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub probe: fn(Value) -> Option<String>,
}

/// The message of deserializing `v` into `T`, if it fails.
fn probe<T: serde::de::DeserializeOwned>(v: Value) -> Option<String> {
    serde_json::from_value::<T>(v).err().map(|e| e.to_string())
}

fn object(required: &[&str], props: Value) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": required, "properties": props})
}

fn limits_schema() -> Value {
    object(
        &[],
        json!({
            "requests_per_second": {"type": "number", "exclusiveMinimum": 0},
            "requests_per_minute": {"type": "integer", "minimum": 1},
            "tokens_per_minute": {"type": "integer", "minimum": 1},
            "max_concurrent": {"type": "integer", "minimum": 1},
            "models": {"type": "array", "items": {"type": "string"}, "description": "Model globs allowed (`openai/*`)."},
            "apis": {"type": "array", "items": {"type": "string"}, "description": "APIs allowed through `/proxy`."},
            "mcp": {"type": "array", "items": {"type": "string"}, "description": "MCP servers or `server.tool` globs allowed."},
            "priority": {"type": "string", "description": "The admission priority of its calls."},
            "weight": {"type": "integer", "minimum": 1, "description": "Its share in fair queuing."},
        }),
    )
}

fn budgets_schema() -> Value {
    json!({"type": "array", "description": "Budgets (docs/keys-and-usage.md): each a name and a money, tokens or requests cap per period.",
        "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}})
}

fn job_schema() -> Value {
    object(
        &["queue", "kind", "payload"],
        json!({
            "queue": {"type": "string", "description": "A queue of `[jobs]`."},
            "kind": {"type": "string", "description": "`http`, `noop` or a kind the config names."},
            "payload": {"description": "The kind's input."},
            "priority": {"type": "integer"},
            "group": {"type": "string", "description": "Jobs of one group run one at a time."},
            "run_at": {"type": "integer", "description": "Not before, in ms since the Unix epoch."},
            "max_attempts": {"type": "integer", "minimum": 1},
            "idempotency_key": {"type": "string", "description": "The same key enqueues once."},
            "callback_url": {"type": "string", "description": "POST /v1/jobs only: a URL under `[jobs.callbacks] allow`, called back signed when the job ends (docs/jobs.md)."},
        }),
    )
}

/// Every body described, with the routes that take it.
pub(crate) fn bodies() -> &'static [BodyDoc] {
    &BODIES
}

static BODIES: [BodyDoc; 13] = [
    BodyDoc {
        name: "Acquire",
        routes: &[("POST", "/v1/limits/acquire")],
        schema: || {
            object(
                &[],
                json!({
                    "resource": {"type": "string", "description": "A limiter resource; exactly one of resource, model and tool."},
                    "model": {"type": "string", "description": "A model, limited as its calls are."},
                    "tool": {"type": "string", "description": "A tool name (`GMAIL_SEND_EMAIL`), limited as its API is."},
                    "cost": {"type": "integer", "minimum": 1, "default": 1},
                    "timeout_ms": {"type": "integer", "description": "How long to wait; 0: take what is free now or nothing."},
                    "priority": {"type": "string"},
                }),
            )
        },
        probe: probe::<AcquireBody>,
    },
    BodyDoc {
        name: "Release",
        routes: &[("POST", "/v1/limits/release")],
        schema: || {
            object(
                &["grant_id"],
                json!({
                    "grant_id": {"type": "string", "description": "From acquire (32 hex digits)."},
                    "actual_cost": {"type": "integer", "minimum": 0, "description": "What the call really cost (tokens)."},
                }),
            )
        },
        probe: probe::<ReleaseBody>,
    },
    BodyDoc {
        name: "Report",
        routes: &[("POST", "/v1/limits/report")],
        schema: || {
            object(
                &["status"],
                json!({
                    "grant_id": {"type": "string"},
                    "resource": {"type": "string"},
                    "model": {"type": "string"},
                    "tool": {"type": "string"},
                    "status": {"type": "integer", "description": "The upstream's HTTP status."},
                    "retry_after": {"type": "string", "description": "The upstream's Retry-After."},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "The upstream's rate-limit headers."},
                }),
            )
        },
        probe: probe::<ReportBody>,
    },
    BodyDoc {
        name: "SetCapacity",
        routes: &[("PUT", "/v1/limits/{resource}")],
        schema: || {
            object(
                &["capacity"],
                json!({
                    "capacity": {"type": "integer", "minimum": 0},
                    "window_ms": {"type": "integer", "minimum": 1},
                }),
            )
        },
        probe: probe::<SetBody>,
    },
    BodyDoc {
        name: "Job",
        routes: &[("POST", "/v1/jobs")],
        schema: job_schema,
        probe: probe::<JobSpec>,
    },
    BodyDoc {
        name: "JobBatch",
        routes: &[("POST", "/v1/jobs/batch")],
        schema: || {
            object(
                &["jobs"],
                json!({"jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}}}),
            )
        },
        probe: probe::<Batch>,
    },
    BodyDoc {
        name: "Schedule",
        routes: &[("POST", "/v1/schedules")],
        schema: || {
            object(
                &["name", "job"],
                json!({
                    "name": {"type": "string"},
                    "every_ms": {"type": "integer", "minimum": 1, "description": "Either this or cron."},
                    "cron": {"type": "string", "description": "A cron expression, in `tz`."},
                    "tz": {"type": "string", "description": "An IANA time zone (default UTC)."},
                    "job": {"$ref": "#/components/schemas/Job"},
                    "start_at": {"type": "integer"},
                    "end_at": {"type": "integer"},
                    "limit": {"type": "integer", "minimum": 1, "description": "Runs at most this many times."},
                }),
            )
        },
        probe: probe::<ScheduleSpec>,
    },
    BodyDoc {
        name: "NewTenant",
        routes: &[("POST", "/v1/tenants")],
        schema: || {
            object(
                &["name"],
                json!({
                    "name": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"},
                    "tier": {"type": "string"},
                    "limits": {"$ref": "#/components/schemas/Limits"},
                    "budgets": budgets_schema(),
                    "tags": {"type": "array", "items": {"type": "string"}},
                }),
            )
        },
        probe: probe::<NewTenant>,
    },
    BodyDoc {
        name: "NewKey",
        routes: &[("POST", "/v1/keys")],
        schema: || {
            object(
                &["tenant"],
                json!({
                    "tenant": {"type": "string"},
                    "name": {"type": "string"},
                    "tier": {"type": "string"},
                    "limits": {"$ref": "#/components/schemas/Limits"},
                    "budgets": budgets_schema(),
                    "tags": {"type": "array", "items": {"type": "string"}},
                }),
            )
        },
        probe: probe::<NewKey>,
    },
    BodyDoc {
        name: "Update",
        routes: &[("PATCH", "/v1/tenants/{name}"), ("PATCH", "/v1/keys/{id}")],
        schema: || {
            object(
                &[],
                json!({
                    "tier": {"type": ["string", "null"], "description": "`null` takes it out of its tier."},
                    "limits": {"$ref": "#/components/schemas/Limits"},
                    "budgets": budgets_schema(),
                    "tags": {"type": "array", "items": {"type": "string"}},
                }),
            )
        },
        probe: probe::<Update>,
    },
    BodyDoc {
        name: "NewTier",
        routes: &[("POST", "/v1/tiers")],
        schema: || {
            object(
                &["name"],
                json!({
                    "name": {"type": "string"},
                    "limits": {"$ref": "#/components/schemas/Limits"},
                    "budgets": budgets_schema(),
                }),
            )
        },
        probe: probe::<NewTier>,
    },
    BodyDoc {
        name: "TierUpdate",
        routes: &[("PUT", "/v1/tiers/{name}")],
        schema: || {
            object(
                &[],
                json!({
                    "limits": {"$ref": "#/components/schemas/Limits"},
                    "budgets": budgets_schema(),
                }),
            )
        },
        probe: probe::<TierUpdate>,
    },
    BodyDoc {
        name: "Limits",
        routes: &[],
        schema: limits_schema,
        probe: probe::<Limits>,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields a type takes, from serde's unknown-field message.
    fn fields(b: &BodyDoc) -> Vec<String> {
        let msg = (b.probe)(json!({"\u{1}probe": 0})).expect("an unknown field is refused");
        let Some((_, list)) = msg.split_once("expected ") else {
            return Vec::new(); // "there are no fields"
        };
        let list = list.strip_prefix("one of ").unwrap_or(list);
        // "`a`", "`a` or `b`", "one of `a`, `b`, `c`".
        list.split(", ")
            .flat_map(|f| f.split(" or "))
            .map(|f| f.trim().trim_matches('`').to_owned())
            .filter(|f| !f.is_empty())
            .collect()
    }

    #[test]
    fn every_schema_names_exactly_the_fields_its_type_takes() {
        for b in bodies() {
            let schema = (b.schema)();
            let mut described: Vec<String> = schema["properties"]
                .as_object()
                .expect("properties")
                .keys()
                .cloned()
                .collect();
            let mut taken = fields(b);
            described.sort();
            taken.sort();
            assert_eq!(described, taken, "schema {} against its type", b.name);
        }
    }

    #[test]
    fn every_route_of_the_router_is_described_with_its_owner() {
        let routes = owners();
        let doc = spec(&routes, DOCS);
        let rows = rows(DOCS);
        for r in &routes {
            let method = r.method.as_ref().map_or("ANY", |m| m.as_str());
            let desc = described(&rows, method, r.path)
                .unwrap_or_else(|| panic!("docs/gateway.md has no row for {method} {}", r.path));
            assert!(
                !desc.is_empty(),
                "{method} {} has an empty description",
                r.path
            );
            let (path, params) = openapi_path(r.path);
            let m = if method == "ANY" { "get" } else { method }.to_ascii_lowercase();
            let op = &doc["paths"][&path][&m];
            assert_eq!(op["description"], desc, "{method} {path}");
            assert_eq!(op["security"], security(r.owner), "{method} {path}");
            assert_eq!(
                op["parameters"].as_array().map_or(0, Vec::len),
                params.len(),
                "{method} {path}"
            );
        }
        // Every operation has its own id.
        let mut ids: Vec<&str> = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|item| item.as_object().unwrap().values())
            .map(|op| op["operationId"].as_str().unwrap())
            .collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "operation ids repeat");
        // Bodies are referenced where their routes are.
        assert_eq!(
            doc["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
                ["$ref"],
            "#/components/schemas/Job"
        );
    }

    #[test]
    fn paths_name_their_parameters_as_openapi_writes_them() {
        assert_eq!(
            openapi_path("/proxy/{api}/{*path}"),
            (
                "/proxy/{api}/{path}".to_owned(),
                vec!["api".to_owned(), "path".to_owned()]
            )
        );
        assert_eq!(
            openapi_path("/v1/models"),
            ("/v1/models".to_owned(), vec![])
        );
    }
}
