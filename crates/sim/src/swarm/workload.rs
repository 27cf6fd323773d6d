//! What the agents call: which models and APIs, how often, how urgently,
//! and how each call is written for the sim directly or for the gateway.

use std::time::Duration;

use serde_json::json;

use super::Mode;
use crate::config::SimConfig;

/// A model the agents call.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTarget {
    /// The provider (`openai`, `anthropic`, `google`, …): the sim's path
    /// `/{provider}/v1/…` and the gateway's prefix `{provider}/`.
    pub provider: String,
    /// The model as the provider names it (`gpt-4o-mini`).
    pub model: String,
    /// Its share of model calls, relative to the others'.
    pub weight: f64,
}

/// A SaaS API the agents call as a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiTarget {
    /// The API (`slack`): the sim's `/{api}/…`, the gateway's
    /// `/proxy/{api}/…`.
    pub api: String,
    /// Its share of tool calls, relative to the others'.
    pub weight: f64,
}

/// The agents' mix of calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Models, one call per step.
    pub models: Vec<ModelTarget>,
    /// APIs for tool calls.
    pub apis: Vec<ApiTarget>,
    /// Share of model calls that stream (SSE).
    pub stream_share: f64,
    /// Tool calls a step makes after its model call, on average: the
    /// whole part always, one more with the fraction's chance.
    pub tool_calls: f64,
    /// Shares of `high`, `normal` and `low` priority calls.
    pub priorities: [f64; 3],
    /// Pause after each step, drawn uniformly from this range (the agent
    /// reading the answer).
    pub think: (Duration, Duration),
}

/// The models of the mixed workload: OpenAI- and Anthropic-format, three
/// providers.
const MIXED_MODELS: &[(&str, &str)] = &[
    ("openai", "gpt-4o-mini"),
    ("openai", "gpt-4o"),
    ("anthropic", "claude-3-5-haiku-latest"),
    ("anthropic", "claude-sonnet-4-5"),
    ("google", "gemini-2.0-flash"),
];

/// The APIs of the mixed workload.
const MIXED_APIS: &[&str] = &["slack", "github", "gmail"];

/// Most tool calls one step makes.
const MAX_TOOL_CALLS: f64 = 16.0;

impl Workload {
    /// The demo's mix: five models of three providers, tool calls to
    /// Slack, GitHub and Gmail, a quarter of model calls streamed, 10%
    /// high and 20% low priority, 0.5–2 s of thought between steps.
    ///
    /// Each model and API is called in proportion to its request limit in
    /// `config`, and a step makes as many tool calls as the APIs' capacity
    /// against the models' allows: a swarm sized to its quotas, whose
    /// every limit a gateway that queues instead of failing can keep busy.
    /// More tool calls a step would make the APIs the loop's bottleneck:
    /// agents waiting their turn at an API call no model, and in the long
    /// run the models would idle in proportion (at twice as many, half the
    /// models' capacity) however well the calls were scheduled.
    pub fn mixed(config: &SimConfig) -> Workload {
        let rate = |limits: crate::Limits| limits.request_bucket().map_or(1.0, |(_, r)| r);
        let models: Vec<ModelTarget> = MIXED_MODELS
            .iter()
            .map(|&(provider, model)| ModelTarget {
                provider: provider.to_owned(),
                model: model.to_owned(),
                weight: rate(config.model_settings(model, provider).limits),
            })
            .collect();
        let apis: Vec<ApiTarget> = MIXED_APIS
            .iter()
            .map(|&api| ApiTarget {
                api: api.to_owned(),
                weight: config.apis.get(api).map_or(1.0, |a| rate(a.limits)),
            })
            .collect();
        let model_rate: f64 = models.iter().map(|m| m.weight).sum();
        let api_rate: f64 = apis.iter().map(|a| a.weight).sum();
        Workload {
            models,
            apis,
            stream_share: 0.25,
            tool_calls: (api_rate / model_rate).clamp(0.0, MAX_TOOL_CALLS),
            priorities: [0.1, 0.7, 0.2],
            think: (Duration::from_millis(500), Duration::from_millis(2_000)),
        }
    }

    /// One model, no tools, normal priority, no streaming: the load of
    /// a benchmark that measures one limit.
    pub fn single_model(provider: &str, model: &str, think: (Duration, Duration)) -> Workload {
        Workload {
            models: vec![ModelTarget {
                provider: provider.to_owned(),
                model: model.to_owned(),
                weight: 1.0,
            }],
            apis: Vec::new(),
            stream_share: 0.0,
            tool_calls: 0.0,
            priorities: [0.0, 1.0, 0.0],
            think,
        }
    }

    /// Every target's name and kind (`model` or `api`), models first:
    /// `gpt-4o-mini`, …, `slack`.
    pub fn target_names(&self) -> impl Iterator<Item = (&str, &'static str)> {
        let models = self.models.iter().map(|m| (m.model.as_str(), "model"));
        models.chain(self.apis.iter().map(|a| (a.api.as_str(), "api")))
    }

    /// A model call: its target index and whether it streams.
    pub(crate) fn pick_model(&self, rng: &mut fastrand::Rng) -> (usize, bool) {
        let i = pick(rng, self.models.iter().map(|m| m.weight));
        (i, rng.f64() < self.stream_share)
    }

    /// The tool calls of a step: their target indices.
    pub(crate) fn pick_tools(&self, rng: &mut fastrand::Rng) -> Vec<usize> {
        if self.apis.is_empty() {
            return Vec::new();
        }
        let mean = self.tool_calls.clamp(0.0, MAX_TOOL_CALLS);
        let n = mean.trunc() as usize + usize::from(rng.f64() < mean.fract());
        (0..n).map(|_| self.pick_tool(rng)).collect()
    }

    /// Where a swarm that was already running would find an agent: the
    /// tool call it is making (`Some`, with the share of tool calls among
    /// all calls) or, `None`, about to call a model.
    pub(crate) fn pick_start(&self, rng: &mut fastrand::Rng) -> Option<usize> {
        let tools = self.tool_calls.clamp(0.0, MAX_TOOL_CALLS);
        let share = tools / (1.0 + tools);
        (!self.apis.is_empty() && rng.f64() < share).then(|| self.pick_tool(rng))
    }

    fn pick_tool(&self, rng: &mut fastrand::Rng) -> usize {
        self.models.len() + pick(rng, self.apis.iter().map(|a| a.weight))
    }

    pub(crate) fn pick_priority(&self, rng: &mut fastrand::Rng) -> &'static str {
        ["high", "normal", "low"][pick(rng, self.priorities.iter().copied())]
    }

    pub(crate) fn pick_think(&self, rng: &mut fastrand::Rng) -> Duration {
        let (lo, hi) = self.think;
        let span = hi.saturating_sub(lo).as_micros() as u64;
        lo + Duration::from_micros(rng.u64(0..=span))
    }

    /// The request for target `i` (a model when below `models.len()`).
    /// The API target `i` is, if it is one.
    pub(crate) fn api_of(&self, i: usize) -> Option<&str> {
        let j = i.checked_sub(self.models.len())?;
        self.apis.get(j).map(|a| a.api.as_str())
    }

    pub(crate) fn request(
        &self,
        client: &reqwest::Client,
        base: &str,
        mode: Mode,
        i: usize,
        stream: bool,
    ) -> reqwest::RequestBuilder {
        match self.models.get(i) {
            Some(m) => model_request(client, base, mode, m, stream),
            None => api_request(client, base, mode, &self.apis[i - self.models.len()].api),
        }
    }
}

/// Index drawn with probability proportional to its weight.
fn pick(rng: &mut fastrand::Rng, weights: impl Iterator<Item = f64> + Clone) -> usize {
    let total: f64 = weights.clone().map(|w| w.max(0.0)).sum();
    let mut x = rng.f64() * total;
    let mut last = 0;
    for (i, w) in weights.enumerate() {
        last = i;
        x -= w.max(0.0);
        if x < 0.0 {
            return i;
        }
    }
    last
}

fn model_request(
    client: &reqwest::Client,
    base: &str,
    mode: Mode,
    m: &ModelTarget,
    stream: bool,
) -> reqwest::RequestBuilder {
    let anthropic = m.provider == "anthropic";
    let endpoint = if anthropic {
        "messages"
    } else {
        "chat/completions"
    };
    let (url, model) = match mode {
        Mode::Direct => (
            format!("{base}/{}/v1/{endpoint}", m.provider),
            m.model.clone(),
        ),
        Mode::Gateway => (
            format!("{base}/v1/{endpoint}"),
            format!("{}/{}", m.provider, m.model),
        ),
    };
    let messages =
        json!([{"role": "user", "content": "Summarise the open issues and pick one to fix."}]);
    let mut body = json!({"model": model, "max_tokens": 64, "messages": messages});
    if stream {
        body["stream"] = json!(true);
        if !anthropic {
            body["stream_options"] = json!({"include_usage": true});
        }
    }
    let mut r = client.post(url).json(&body);
    if mode == Mode::Direct {
        // Straight to the provider: its key, its way (the gateway sends
        // its own).
        r = if anthropic {
            r.header("x-api-key", DIRECT_KEY)
        } else {
            r.bearer_auth(DIRECT_KEY)
        };
    }
    if anthropic {
        r.header("anthropic-version", "2023-06-01")
    } else {
        r
    }
}

/// The key agents calling the sim directly send.
const DIRECT_KEY: &str = "sk-swarm-direct";

fn api_request(
    client: &reqwest::Client,
    base: &str,
    mode: Mode,
    api: &str,
) -> reqwest::RequestBuilder {
    let root = match mode {
        Mode::Direct => format!("{base}/{api}"),
        Mode::Gateway => format!("{base}/proxy/{api}"),
    };
    match api {
        // A write carries an idempotency key, so that it may be retried.
        "slack" => client
            .post(format!("{root}/chat.postMessage"))
            .header("idempotency-key", crate::swarm::new_key())
            .json(&json!({"channel": "C0123", "text": "build is green"})),
        "github" => client.get(format!("{root}/repos/acme/app/issues?state=open")),
        "gmail" => client.get(format!("{root}/gmail/v1/users/me/messages?q=is:unread")),
        _ => client.get(format!("{root}/items")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_follows_the_limits() {
        let w = Workload::mixed(&SimConfig::default());
        let weights: Vec<f64> = w.models.iter().map(|m| m.weight).collect();
        assert_eq!(weights, [3.0, 3.0, 2.0, 2.0, 5.0]);
        let apis: Vec<f64> = w.apis.iter().map(|a| a.weight).collect();
        assert_eq!(apis, [3.0, 5.0, 2.0]);
        // 10 API requests a second against 15 model requests.
        assert!((w.tool_calls - 10.0 / 15.0).abs() < 1e-12);
    }

    #[test]
    fn agents_start_at_a_tool_call_as_often_as_calls_are_tool_calls() {
        let w = Workload::mixed(&SimConfig::default());
        let mut rng = fastrand::Rng::with_seed(11);
        let mut apis = [0u32; 3];
        let mut models = 0u32;
        for _ in 0..10_000 {
            match w.pick_start(&mut rng) {
                Some(i) => apis[i - w.models.len()] += 1,
                None => models += 1,
            }
        }
        // Two tool calls in five calls, each API by its limit (3, 5, 2).
        assert!((5_700..6_300).contains(&models), "{models}");
        assert!((1_000..1_400).contains(&apis[0]), "{apis:?}");
        assert!((1_800..2_200).contains(&apis[1]), "{apis:?}");
        assert!((600..1_000).contains(&apis[2]), "{apis:?}");
        let none = Workload::single_model("openai", "m", Default::default());
        assert_eq!(none.pick_start(&mut rng), None);
    }

    #[test]
    fn picks_follow_weights() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut seen = [0u32; 3];
        for _ in 0..10_000 {
            seen[pick(&mut rng, [1.0, 0.0, 3.0].into_iter())] += 1;
        }
        assert_eq!(seen[1], 0);
        assert!((2_300..2_700).contains(&seen[0]), "{seen:?}");
    }
}
