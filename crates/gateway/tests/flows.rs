//! `POST /v1/flows`: bad flows named field by field; a flow of a parent
//! and two children runs the parent after both children completed (by
//! the order of the job events, which is commit order), and the parent
//! shows its children's results; another tenant sees none of it.

mod common;

use common::{Harness, expect_error, sim_config, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn slack(text: &str) -> Value {
    json!({
        "queue": "default",
        "kind": "http",
        "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage", "body": {"text": text}}
    })
}

async fn post(h: &Harness, body: &Value) -> reqwest::Response {
    h.post("/v1/flows", body)
        .header("x-sluice-workspace", "acme")
        .send()
        .await
        .expect("the gateway answers")
}

async fn get(h: &Harness, path: &str, tenant: &str) -> reqwest::Response {
    h.get(path)
        .header("x-sluice-workspace", tenant)
        .send()
        .await
        .expect("the gateway answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_runs_after_both_children() {
    let h = Harness::with(sim_config(), |_| {}).await;

    let nested = |depth: usize| {
        let mut flow = json!({"parent": slack("p"), "children": [slack("c")]});
        for _ in 1..depth {
            flow = json!({"parent": slack("p"), "children": [flow]});
        }
        flow
    };
    for (body, param) in [
        (json!({"children": [slack("a")]}), "parent"),
        (json!({"parent": slack("p")}), "children"),
        (json!({"parent": slack("p"), "children": []}), "children"),
        (
            json!({"parent": slack("p"), "children": [slack("a")], "on_child_failure": "maybe"}),
            "on_child_failure",
        ),
        (
            json!({"parent": slack("p"), "children": [slack("a")], "colour": 1}),
            "colour",
        ),
        (
            json!({"parent": slack("p"), "children": [{"queue": "nope", "kind": "http", "payload": {}}]}),
            "children[0].queue",
        ),
        (
            json!({"parent": slack("p"), "children": [{"parent": slack("q"), "children": [{"queue": "default"}]}]}),
            "children[0].children[0].kind",
        ),
        (
            nested(5),
            "children[0].children[0].children[0].children[0].children",
        ),
    ] {
        let e = expect_error(post(&h, &body).await, 400, "invalid_request").await;
        assert_eq!(e["param"], param, "{body}: {e}");
    }

    let res = post(
        &h,
        &json!({"parent": slack("merge"), "children": [slack("one"), slack("two")]}),
    )
    .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let flow: Value = res.json().await.unwrap();
    let parent = flow["parent"]["id"].as_i64().unwrap();
    let jobs = flow["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    let children: Vec<i64> = jobs[1..]
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert!(jobs[1..].iter().all(|j| j["parent"] == parent));
    assert_eq!(flow["parent"]["state"], "scheduled");
    assert_eq!(flow["parent"]["pending_children"], 2);

    // Another tenant sees nothing of it.
    let res = get(&h, &format!("/v1/jobs/{parent}"), "globex").await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);

    let done: Value = wait_for("the parent to complete", || async {
        let j: Value = get(&h, &format!("/v1/jobs/{parent}"), "acme")
            .await
            .json()
            .await
            .ok()?;
        (j["state"] == "completed").then_some(j)
    })
    .await;
    let shown: Vec<i64> = done["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["state"], "completed");
            assert_eq!(c["result"]["status"], 200);
            c["id"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(shown, children);

    // The order of events is the order of commits: both children
    // completed before the parent was claimed.
    let res = h
        .get("/v1/jobs/events")
        .header("x-sluice-workspace", "acme")
        .header("last-event-id", "0")
        .send()
        .await
        .unwrap();
    let mut res = res;
    let mut text = String::new();
    let order = loop {
        let chunk = res.chunk().await.unwrap().expect("the stream goes on");
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        let events: Vec<Value> = text
            .split("\n\n")
            .filter_map(|b| b.lines().find_map(|l| l.strip_prefix("data: ")))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        let at = |job: i64, name: &str| {
            events
                .iter()
                .position(|e| e["job"] == job && e["event"] == name)
        };
        if let Some(done) = at(parent, "completed") {
            let active = at(parent, "active").expect("the parent was claimed");
            break (
                children
                    .iter()
                    .map(|c| at(*c, "completed").unwrap())
                    .collect::<Vec<_>>(),
                active,
                done,
            );
        }
    };
    let (children_done, parent_active, _) = order;
    assert!(
        children_done.iter().all(|c| *c < parent_active),
        "children completed at {children_done:?}, parent claimed at {parent_active}"
    );
}
