use std::sync::Arc;

use sluice_keys::{Budget, Caller, Limits, Money};
use tower::Layer;

use super::*;
use crate::layers::testing::{Later, buffered, model_call, state};

const MODEL: &str = "openai/gpt-4o-mini";

fn budget(json: serde_json::Value) -> Budget {
    serde_json::from_value(json).unwrap()
}

/// A call of a key whose tenant has `budgets`.
fn call_with(state: &AppState, budgets: Vec<Budget>) -> Req<Box<Call>> {
    let mut req = model_call(state, MODEL, false, &[]);
    req.call.ctx.caller = Some(Arc::new(Caller {
        tenant: "acme".into(),
        key_id: "0123456789ab".into(),
        key_limits: Limits::default(),
        tenant_limits: Limits::default(),
        key_budgets: Arc::from([]),
        tenant_budgets: budgets.into(),
        tags: Vec::new(),
    }));
    req
}

/// Below the layer: an answer that settles at `used` tokens, as the
/// usage layer does.
fn answered(used: u64) -> impl Next<Req<Box<Call>>, Served<Reply>> {
    Later::new(move |mut req: Req<Box<Call>>| async move {
        let hold = req.notes.budget.take().expect("a reservation goes down");
        hold.settle(Spend {
            tokens: used,
            requests: 1,
            ..Spend::default()
        });
        Served::ok(buffered("{}"), req.notes)
    })
}

#[tokio::test]
async fn a_spent_budget_refuses_with_its_name_and_reset() {
    let state = state();
    let daily = budget(serde_json::json!({"name": "daily", "requests": 2, "period": "day"}));
    let svc = BudgetLayer::new().layer(answered(10));
    for _ in 0..2 {
        let mut served = call(svc.clone(), call_with(&state, vec![daily.clone()])).await;
        assert!(served.result.is_ok());
        let note = served
            .notes
            .meta
            .budget
            .take()
            .expect("a note for the header");
        assert_eq!(note.budget, "tenant:acme:daily");
    }
    let served = call(svc, call_with(&state, vec![daily])).await;
    let e = served.result.expect_err("refused");
    assert_eq!(e.status(), axum::http::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(e.kind().1, "budget_exceeded");
    let m = e.to_string();
    assert!(
        m.contains(r#"budget "daily" of tenant "acme""#)
            && m.contains("2 requests spent of 2 requests"),
        "{m}"
    );
    let wait = e.retry_after().expect("Retry-After");
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(86_400),
        "{wait:?}"
    );
}

#[tokio::test]
async fn a_call_that_fails_gives_its_reservation_back() {
    let state = state();
    let b = budget(serde_json::json!({"name": "b", "requests": 1, "window_seconds": 3600}));
    let failing = Later::new(|req: Req<Box<Call>>| async move {
        assert!(req.notes.budget.is_some());
        Served::err(ApiError::BadGateway("down".into()), req.notes)
    });
    let svc = BudgetLayer::new().layer(failing);
    // A budget of one request, and ten calls that each failed.
    for _ in 0..10 {
        let served = call(svc.clone(), call_with(&state, vec![b.clone()])).await;
        assert!(matches!(served.result, Err(ApiError::BadGateway(_))));
    }
    let served = call(
        BudgetLayer::new().layer(answered(5)),
        call_with(&state, vec![b]),
    )
    .await;
    assert!(served.result.is_ok());
}

#[tokio::test]
async fn the_worst_case_is_priced_and_bounded() {
    let state = state();
    // The default max_tokens alone is above a 100-token budget.
    let small = budget(serde_json::json!({"name": "tiny", "tokens": 100, "period": "month"}));
    let served = call(
        BudgetLayer::new().layer(answered(1)),
        call_with(&state, vec![small]),
    )
    .await;
    let e = served.result.expect_err("refused");
    assert_eq!(e.status(), axum::http::StatusCode::BAD_REQUEST);
    assert!(e.to_string().contains("lower max_tokens"), "{e}");

    // Money: reserved at the model's price; the note says how much is left.
    let mut money = budget(serde_json::json!({"name": "m", "requests": 1000, "period": "week"}));
    money.money = Some(Money::from_nanodollars(1_000_000_000));
    let mut served = call(
        BudgetLayer::new().layer(answered(1)),
        call_with(&state, vec![money.clone()]),
    )
    .await;
    let note = served.notes.meta.budget.take().expect("a note");
    assert!(note.used > 0.0 && note.used < 0.01, "{note:?}");

    // A model without a price cannot be held to a money budget.
    let mut req = call_with(&state, vec![money]);
    req.call.model = "openai/gpt-unpriced".into();
    let served = call(BudgetLayer::new().layer(answered(1)), req).await;
    let e = served.result.expect_err("refused");
    assert_eq!(e.status(), axum::http::StatusCode::FORBIDDEN);
    assert!(e.to_string().contains("no price"), "{e}");
    // It says how to add one.
    assert!(e.to_string().contains("[prices."), "{e}");
    assert!(e.to_string().contains("[pricing] catalog"), "{e}");
}

#[tokio::test]
async fn callers_without_budgets_pass_untouched() {
    let state = state();
    let probe = Later::new(|req: Req<Box<Call>>| async move {
        assert!(req.notes.budget.is_none());
        Served::ok(buffered("{}"), req.notes)
    });
    let served = call(
        BudgetLayer::new().layer(probe),
        model_call(&state, MODEL, false, &[]),
    )
    .await;
    assert!(served.result.is_ok() && served.notes.meta.budget.is_none());
}

#[tokio::test]
async fn a_keys_weight_from_the_store_goes_into_its_admission_ticket() {
    let state = state();
    let plain = model_call(&state, MODEL, false, &[]);
    assert_eq!(
        plain.call.ctx.ticket().weight,
        None,
        "the tenant's, from the config"
    );
    let mut req = call_with(&state, Vec::new());
    let mut caller = (**req.call.ctx.caller.as_ref().unwrap()).clone();
    caller.tenant_limits.weight = Some(2);
    req.call.ctx.caller = Some(Arc::new(caller.clone()));
    assert_eq!(req.call.ctx.ticket().weight.map(|w| w.get()), Some(2));
    // The key's own weight wins over its tenant's.
    caller.key_limits.weight = Some(5);
    req.call.ctx.caller = Some(Arc::new(caller));
    assert_eq!(req.call.ctx.ticket().weight.map(|w| w.get()), Some(5));
}

/// Issue 33: a fallback without a price answered for free under a money
/// budget (the check skipped it), and a fallback in another provider's
/// format was reserved at its primary's output limit.
#[tokio::test]
async fn every_fallback_must_have_a_price_under_a_money_budget() {
    let mut config = crate::config::Config::default();
    config.trace.enabled = false;
    config
        .fallbacks
        .insert(MODEL.into(), vec!["openai/gpt-unpriced".into()]);
    let state = crate::layers::testing::state_with(config);
    let mut money = budget(serde_json::json!({"name": "m", "requests": 1000, "period": "week"}));
    money.money = Some(Money::from_nanodollars(1_000_000_000));
    let served = call(
        BudgetLayer::new().layer(answered(1)),
        call_with(&state, vec![money.clone()]),
    )
    .await;
    let e = served.result.expect_err("refused");
    assert_eq!(e.status(), axum::http::StatusCode::FORBIDDEN);
    let m = e.to_string();
    assert!(
        m.contains("gpt-unpriced") && m.contains("a fallback of") && m.contains("no price"),
        "{m}"
    );
    // Without a money budget the fallback is fine.
    let requests = budget(serde_json::json!({"name": "r", "requests": 10, "period": "week"}));
    let served = call(
        BudgetLayer::new().layer(answered(1)),
        call_with(&state, vec![requests]),
    )
    .await;
    assert!(served.result.is_ok());
}

#[tokio::test]
async fn a_fallback_in_another_format_is_reserved_at_its_own_limit() {
    let mut config = crate::config::Config::default();
    config.trace.enabled = false;
    let sonnet = "anthropic/claude-sonnet-4-5";
    config.fallbacks.insert(MODEL.into(), vec![sonnet.into()]);
    let state = crate::layers::testing::state_with(config);
    let tokens = budget(serde_json::json!({"name": "t", "tokens": 1_000_000, "period": "week"}));
    let req = call_with(&state, vec![tokens]);
    let c = &req.call;
    let ask = worst_case(
        &state,
        c,
        &state.budget_rules.of(c.ctx.caller.as_ref().unwrap()),
    )
    .expect("priced");
    // Anthropic's translation sends (and reserves) 4,096 output tokens
    // where the OpenAI model reserves `default_max_tokens` (1,024).
    assert!(ask.tokens > 4_096, "{ask:?}");
}
