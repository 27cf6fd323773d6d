//! `sluice jobs`: look at and steer the durable jobs of a running gateway
//! through its HTTP API (`/v1/jobs`, `/v1/queues`).

pub(crate) mod show;

use std::process::ExitCode;

use reqwest::Method;
use serde_json::Value;

use crate::client::{Failure, segment};

/// Where the gateway is and who is asking.
#[derive(Debug, Clone, clap::Args)]
pub struct JobsArgs {
    /// The gateway's base URL (`sluice serve` listens on 127.0.0.1:8080 by default).
    #[arg(
        long,
        global = true,
        env = "SLUICE_TARGET",
        default_value = "http://127.0.0.1:8080"
    )]
    target: String,
    /// The admin token, for queue-wide commands when the gateway has one.
    #[arg(
        long,
        global = true,
        env = "SLUICE_ADMIN_TOKEN",
        hide_env_values = true
    )]
    admin_token: Option<String>,
    /// The tenant's API key, when the gateway has tenants.
    #[arg(long, global = true, env = "SLUICE_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// The workspace (`x-sluice-workspace`), when the gateway has no tenants.
    #[arg(long, global = true, env = "SLUICE_WORKSPACE")]
    workspace: Option<String>,
    /// Print the gateway's JSON answer instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: JobsCommand,
}

#[derive(Debug, Clone, clap::Subcommand)]
enum JobsCommand {
    /// List the workspace's jobs, oldest first.
    List {
        /// Only this queue.
        #[arg(long)]
        queue: Option<String>,
        /// Only this state (available, scheduled, running, retryable,
        /// completed, dead, cancelled).
        #[arg(long)]
        state: Option<String>,
        /// At most this many (1 to 1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Start after this cursor (`next_cursor` of an earlier page).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Show one job whole: payload, result, last error.
    Show {
        /// The job's id.
        id: String,
    },
    /// Run a dead job again, or every dead job of a queue (`--dead QUEUE`).
    Retry {
        /// The job's id.
        #[arg(required_unless_present = "dead", conflicts_with = "dead")]
        id: Option<String>,
        /// Retry every dead job of this queue (admin).
        #[arg(long, value_name = "QUEUE")]
        dead: Option<String>,
    },
    /// Cancel a job that has not finished.
    Cancel {
        /// The job's id.
        id: String,
    },
    /// Delete the dead jobs of a queue (admin).
    Purge {
        /// The queue.
        queue: String,
    },
    /// Stop workers claiming from a queue (admin).
    Pause {
        /// The queue.
        queue: String,
    },
    /// Let workers claim from a queue again (admin).
    Resume {
        /// The queue.
        queue: String,
    },
    /// Jobs by state for every queue (admin).
    Queues,
    /// The workspace's schedules: list, show, create (or replace), delete.
    #[command(subcommand)]
    Schedules(SchedulesCommand),
}

#[derive(Debug, Clone, clap::Subcommand)]
enum SchedulesCommand {
    /// List the workspace's schedules.
    List,
    /// Show one schedule whole.
    Show {
        /// Its name.
        name: String,
    },
    /// Store a schedule (replacing the workspace's schedule of that name).
    Create {
        /// Its name: letters, digits, `-`, `_`, `.`, `:`.
        name: String,
        /// Run every this many milliseconds.
        #[arg(long, required_unless_present = "cron", conflicts_with = "cron")]
        every_ms: Option<u64>,
        /// Run at the ticks of this cron expression (5 fields, or 6 with seconds first).
        #[arg(long)]
        cron: Option<String>,
        /// The time zone the cron expression is read in (IANA name; UTC by default).
        #[arg(long, requires = "cron")]
        tz: Option<String>,
        /// The job each run enqueues, as JSON: {"queue", "kind", "payload", ...}.
        #[arg(long)]
        job: String,
        /// No run before this instant (milliseconds since the Unix epoch).
        #[arg(long)]
        start_at: Option<i64>,
        /// No run after this instant (milliseconds since the Unix epoch).
        #[arg(long)]
        end_at: Option<i64>,
        /// At most this many runs.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Delete a schedule (the jobs it enqueued stay).
    Delete {
        /// Its name.
        name: String,
    },
}

/// Runs a `sluice jobs` command; exit 1 when the gateway cannot be reached
/// or answers with an error (its message printed), 2 for bad arguments.
pub async fn run(args: JobsArgs) -> ExitCode {
    match call(&args).await {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(e)) => {
            eprintln!("sluice jobs: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(e)) => {
            eprintln!("sluice jobs: {e}");
            ExitCode::from(1)
        }
    }
}

/// Whose credentials a call carries.
#[derive(Clone, Copy)]
enum Scope {
    /// One tenant's jobs: the API key or workspace.
    Tenant,
    /// Queue-wide: the admin token if given.
    Admin,
}

/// Builds the request for the command, sends it, and formats the answer.
async fn call(args: &JobsArgs) -> Result<String, Failure> {
    use JobsCommand as C;
    // A job command names a job of the caller's own, or, as the operator
    // (the admin token, without a tenant's key or workspace), any
    // tenant's (issue 38: the admin token alone was refused as a tenant).
    let (jobs, own) = if as_admin(args) {
        ("/v1/jobs/all", Scope::Admin)
    } else {
        ("/v1/jobs", Scope::Tenant)
    };
    let (method, path, scope) = match &args.command {
        C::List {
            queue,
            state,
            limit,
            cursor,
        } => {
            let mut query = url::form_urlencoded::Serializer::new(String::new());
            query.append_pair("limit", &limit.to_string());
            for (k, v) in [("queue", queue), ("state", state), ("cursor", cursor)] {
                if let Some(v) = v {
                    query.append_pair(k, v);
                }
            }
            (Method::GET, format!("{jobs}?{}", query.finish()), own)
        }
        C::Show { id } => (Method::GET, format!("{jobs}/{}", segment(id)), own),
        C::Retry { id: Some(id), .. } => {
            (Method::POST, format!("{jobs}/{}/retry", segment(id)), own)
        }
        C::Retry { dead: Some(q), .. } => (
            Method::POST,
            format!("/v1/queues/{}/dead/retry", segment(q)),
            Scope::Admin,
        ),
        C::Retry { .. } => {
            return Err(Failure::Usage(
                "retry needs a job id or --dead QUEUE".into(),
            ));
        }
        C::Cancel { id } => (Method::POST, format!("{jobs}/{}/cancel", segment(id)), own),
        C::Purge { queue } => (
            Method::DELETE,
            format!("/v1/queues/{}/dead", segment(queue)),
            Scope::Admin,
        ),
        C::Pause { queue } => (
            Method::POST,
            format!("/v1/queues/{}/pause", segment(queue)),
            Scope::Admin,
        ),
        C::Resume { queue } => (
            Method::POST,
            format!("/v1/queues/{}/resume", segment(queue)),
            Scope::Admin,
        ),
        C::Queues => (Method::GET, "/v1/queues".to_owned(), Scope::Admin),
        C::Schedules(s) => return schedules(args, s).await,
    };
    let body = send(args, method, &path, scope, None).await?;
    if args.json {
        return Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&body).unwrap_or_default()
        ));
    }
    Ok(match &args.command {
        C::List { .. } => show::list(&body),
        C::Show { .. } | C::Retry { id: Some(_), .. } | C::Cancel { .. } => show::job(&body),
        C::Retry { .. } => format!(
            "{}: {} dead jobs made available again\n",
            body["queue"].as_str().unwrap_or("?"),
            body["retried"]
        ),
        C::Purge { .. } => format!(
            "{}: {} dead jobs deleted\n",
            body["queue"].as_str().unwrap_or("?"),
            body["purged"]
        ),
        C::Pause { .. } | C::Resume { .. } => {
            let paused = body["paused"].as_bool().unwrap_or(false);
            format!(
                "{}: {}\n",
                body["queue"].as_str().unwrap_or("?"),
                if paused { "paused" } else { "running" }
            )
        }
        C::Queues => show::queues(&body),
        C::Schedules(_) => String::new(),
    })
}

/// Whether job commands ask as the operator: an admin token, and neither
/// a tenant's key nor a workspace saying whose jobs are meant.
fn as_admin(args: &JobsArgs) -> bool {
    let asker = crate::usage::asker(
        false,
        args.admin_token.as_deref(),
        args.api_key.as_deref(),
        "jobs",
    );
    args.workspace.is_none() && asker == Ok(crate::usage::Asker::Admin)
}

/// Runs a `sluice jobs schedules` command.
async fn schedules(args: &JobsArgs, command: &SchedulesCommand) -> Result<String, Failure> {
    use SchedulesCommand as S;
    let mut request = None;
    let (method, path) = match command {
        S::List => (Method::GET, "/v1/schedules".to_owned()),
        S::Show { name } => (Method::GET, format!("/v1/schedules/{}", segment(name))),
        S::Delete { name } => (Method::DELETE, format!("/v1/schedules/{}", segment(name))),
        S::Create {
            name,
            every_ms,
            cron,
            tz,
            job,
            start_at,
            end_at,
            limit,
        } => {
            let job: Value = serde_json::from_str(job)
                .map_err(|e| Failure::Usage(format!("--job is not JSON: {e}")))?;
            let mut body = serde_json::json!({"name": name, "job": job});
            for (key, value) in [
                ("every_ms", every_ms.map(Value::from)),
                ("cron", cron.clone().map(Value::from)),
                ("tz", tz.clone().map(Value::from)),
                ("start_at", start_at.map(Value::from)),
                ("end_at", end_at.map(Value::from)),
                ("limit", limit.map(Value::from)),
            ] {
                if let Some(v) = value {
                    body[key] = v;
                }
            }
            request = Some(body);
            (Method::POST, "/v1/schedules".to_owned())
        }
    };
    let body = send(args, method, &path, Scope::Tenant, request.as_ref()).await?;
    if args.json {
        return Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&body).unwrap_or_default()
        ));
    }
    Ok(match command {
        S::List => show::schedules(&body),
        S::Show { .. } | S::Create { .. } => show::schedule(&body),
        S::Delete { name } => format!("{name}: deleted\n"),
    })
}

async fn send(
    args: &JobsArgs,
    method: Method,
    path: &str,
    scope: Scope,
    body: Option<&Value>,
) -> Result<Value, Failure> {
    let bearer = match scope {
        Scope::Admin => args.admin_token.as_ref().or(args.api_key.as_ref()),
        Scope::Tenant => args.api_key.as_ref(),
    };
    let auth_hint: fn(u16) -> &'static str = match scope {
        Scope::Admin => |s| match s {
            401 | 403 => " (queue-wide commands take --admin-token)",
            _ => "",
        },
        Scope::Tenant => |s| if s == 401 { " (pass --api-key)" } else { "" },
    };
    crate::client::send(crate::client::Call {
        target: &args.target,
        method,
        path,
        bearer: bearer.map(String::as_str),
        workspace: args.workspace.as_deref(),
        body,
        auth_hint,
    })
    .await
}
