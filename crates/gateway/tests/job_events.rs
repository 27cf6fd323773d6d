//! `GET /v1/jobs/events`: a tenant's stream sees its job enqueued, active
//! and completed with the result, never another tenant's jobs; a stream
//! resumed with `Last-Event-ID` goes on after that event; the admin sees
//! every tenant's; bad parameters are named.

mod common;

use common::{Harness, expect_error, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};

const ADMIN: &str = "s3cret";

/// One server-sent event: id, name, data.
#[derive(Debug, Clone)]
struct Event {
    id: i64,
    name: String,
    data: Value,
}

/// An open event stream.
struct Stream {
    res: reqwest::Response,
    buf: String,
}

impl Stream {
    async fn open(h: &Harness, who: &str, query: &str, last: Option<i64>) -> Stream {
        let mut req = match who {
            "admin" => {
                (h.http.get(h.url(&format!("/v1/jobs/events/all{query}")))).bearer_auth(ADMIN)
            }
            tenant => (h.http.get(h.url(&format!("/v1/jobs/events{query}"))))
                .header("x-sluice-workspace", tenant),
        };
        if let Some(id) = last {
            req = req.header("last-event-id", id.to_string());
        }
        let res = req.send().await.expect("the gateway answers");
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(common::header(&res, "content-type"), "text/event-stream");
        Stream {
            res,
            buf: String::new(),
        }
    }

    /// Events until `done` holds for one (that one included).
    async fn until(&mut self, done: impl Fn(&Event) -> bool) -> Vec<Event> {
        let mut seen = Vec::new();
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                if block.starts_with(':') {
                    continue; // keep-alive
                }
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .unwrap_or_default()
                        .to_owned()
                };
                let e = Event {
                    id: field("id: ").parse().expect("an integer id"),
                    name: field("event: "),
                    data: serde_json::from_str(&field("data: ")).expect("JSON data"),
                };
                let stop = done(&e);
                seen.push(e);
                if stop {
                    return seen;
                }
            }
            let chunk = self
                .res
                .chunk()
                .await
                .expect("the stream reads")
                .expect("the stream goes on");
            self.buf
                .push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }
}

async fn enqueue(h: &Harness, tenant: &str, text: &str) -> i64 {
    let body = json!({
        "queue": "default",
        "kind": "http",
        "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage", "body": {"text": text}}
    });
    let res = h
        .post("/v1/jobs", &body)
        .header("x-sluice-workspace", tenant)
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json::<Value>().await.unwrap()["id"].as_i64().unwrap()
}

fn completes(job: i64) -> impl Fn(&Event) -> bool {
    move |e| e.name == "completed" && e.data["job"] == job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_see_their_jobs_complete_and_resume() {
    let h = Harness::with(sim_config(), |c| c.admin_token = Some(ADMIN.into())).await;

    // Bad parameters are named; a tenant cannot ask for another's events.
    for (query, field) in [
        ("?colour=red", "colour"),
        ("?job=seven", "job"),
        ("?tenant=globex", "tenant"),
    ] {
        let res = h
            .get(&format!("/v1/jobs/events{query}"))
            .header("x-sluice-workspace", "acme")
            .send()
            .await
            .unwrap();
        let e = expect_error(res, 400, "invalid_request").await;
        assert_eq!(e["param"], field, "{query}: {e}");
    }
    let res = h
        .get("/v1/jobs/events")
        .header("x-sluice-workspace", "acme")
        .header("last-event-id", "yesterday")
        .send()
        .await
        .unwrap();
    expect_error(res, 400, "invalid_request").await;

    let mut acme = Stream::open(&h, "acme", "", None).await;
    let mut globex = Stream::open(&h, "globex", "", None).await;
    let mut admin = Stream::open(&h, "admin", "", None).await;
    let mine = enqueue(&h, "acme", "mine").await;
    let theirs = enqueue(&h, "globex", "theirs").await;

    // acme's stream: its job's whole life, the result with `completed`.
    let seen = acme.until(completes(mine)).await;
    assert!(seen.iter().all(|e| e.data["tenant"] == "acme"), "{seen:?}");
    let names: Vec<&str> = seen
        .iter()
        .filter(|e| e.data["job"] == mine)
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["enqueued", "active", "completed"]);
    let done = seen.last().unwrap();
    assert_eq!(done.data["result"]["status"], 200, "{:?}", done.data);
    assert!(seen.windows(2).all(|w| w[0].id < w[1].id));

    // globex's: its own job only, never acme's.
    let seen = globex.until(completes(theirs)).await;
    assert!(
        seen.iter().all(|e| e.data["tenant"] == "globex"),
        "{seen:?}"
    );

    // The admin's: both tenants' jobs.
    let mut completed = Vec::new();
    while completed.len() < 2 {
        let seen = admin.until(|e| e.name == "completed").await;
        completed.extend(
            seen.iter()
                .filter(|e| e.name == "completed")
                .map(|e| e.data["job"].clone()),
        );
    }
    assert!(completed.contains(&json!(mine)) && completed.contains(&json!(theirs)));

    // Resumed after acme's `enqueued`: the events after it, and only those.
    let enqueued = acme_enqueued_id(&h, mine).await;
    let mut resumed = Stream::open(&h, "acme", "", Some(enqueued)).await;
    let again = resumed.until(completes(mine)).await;
    let names: Vec<&str> = again.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["active", "completed"]);
    assert!(again[0].id > enqueued);

    // Filtered by job: a stream resumed from the start of that job.
    let mut one = Stream::open(&h, "acme", &format!("?job={mine}&queue=default"), Some(0)).await;
    let only = one.until(completes(mine)).await;
    assert!(only.iter().all(|e| e.data["job"] == mine), "{only:?}");
    assert_eq!(only.first().map(|e| e.name.as_str()), Some("enqueued"));
}

/// The id of the `enqueued` event of acme's job `job`, read from a
/// stream resumed from the start.
async fn acme_enqueued_id(h: &Harness, job: i64) -> i64 {
    let mut s = Stream::open(h, "acme", "", Some(0)).await;
    let seen = s
        .until(|e| e.name == "enqueued" && e.data["job"] == job)
        .await;
    seen.last().unwrap().id
}
