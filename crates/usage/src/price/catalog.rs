//! The community price map: LiteLLM's `model_prices_and_context_window.json`
//! format (MIT-licensed data), read into Sluice's model names, prices and
//! context windows.
//!
//! A snapshot ships in the binary (`crates/usage/catalog/model_prices.json`,
//! the chat, completion, embedding and responses entries with token
//! prices); a file in the same format replaces it (`[pricing] catalog`,
//! written by `sluice prices refresh`). The hand-checked table
//! (`prices.json`) and `[prices]` go over it.
//!
//! Names: an entry keyed `gpt-4o` of `litellm_provider` `openai` is
//! Sluice's `openai/gpt-4o`; one keyed with a provider of its own
//! (`gemini/gemini-2.0-flash`, `deepseek/deepseek-chat`) keeps it, but
//! for the providers Sluice names differently ([`SLUICE_PROVIDER`]:
//! LiteLLM's `gemini` is Sluice's `google`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Price, PriceError, PriceTable};

/// The snapshot shipped in the binary.
const SHIPPED: &str = include_str!("../../catalog/model_prices.json");

/// The largest price map read (the whole LiteLLM map is about 3.5 MB).
pub const MAX_CATALOG_BYTES: usize = 32 << 20;

/// LiteLLM's provider names that Sluice's defaults name otherwise.
const SLUICE_PROVIDER: &[(&str, &str)] = &[("gemini", "google")];

/// The modes whose entries price tokens of calls Sluice makes.
const MODES: &[&str] = &["chat", "completion", "embedding", "responses"];

/// A model's context window, as the price map gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    /// The longest prompt, in tokens.
    pub max_input_tokens: Option<u64>,
    /// The longest completion, in tokens.
    pub max_output_tokens: Option<u64>,
}

/// Prices and context windows read from a price map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    /// The prices, by Sluice model name.
    pub prices: PriceTable,
    /// The context windows, by Sluice model name.
    pub windows: BTreeMap<String, Window>,
    /// Entries left out: other modes, no token price, or prices that do
    /// not read.
    pub skipped: usize,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    litellm_provider: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    input_cost_per_token: Option<serde_json::Value>,
    #[serde(default)]
    output_cost_per_token: Option<serde_json::Value>,
    #[serde(default)]
    cache_read_input_token_cost: Option<serde_json::Value>,
    #[serde(default)]
    max_input_tokens: Option<serde_json::Value>,
    #[serde(default)]
    max_output_tokens: Option<serde_json::Value>,
}

impl Catalog {
    /// The snapshot shipped in the binary.
    ///
    /// # Panics
    /// Never: the file is checked by this crate's tests.
    pub fn shipped() -> Catalog {
        Catalog::from_litellm_json(SHIPPED).expect("the shipped price map reads")
    }

    /// A catalog from a price map in LiteLLM's format. Entries of other
    /// modes (images, audio, rerank, …) or without a token price are
    /// skipped and counted; keys starting with `_` and `sample_spec` are
    /// comments.
    ///
    /// # Errors
    /// [`PriceError`] when the text is larger than [`MAX_CATALOG_BYTES`],
    /// is not a JSON object, or prices nothing at all.
    pub fn from_litellm_json(json: &str) -> Result<Catalog, PriceError> {
        let fail = |reason: String| PriceError {
            field: "pricing.catalog".into(),
            reason,
        };
        if json.len() > MAX_CATALOG_BYTES {
            return Err(fail(format!(
                "the price map is {} bytes, more than the {MAX_CATALOG_BYTES} read",
                json.len()
            )));
        }
        let raw: BTreeMap<String, serde_json::Value> = serde_json::from_str(json).map_err(|e| {
            fail(format!(
                "not a price map in LiteLLM's format (a JSON object of models): {e}"
            ))
        })?;
        let mut catalog = Catalog::default();
        for (key, value) in raw {
            if key.starts_with('_') || key == "sample_spec" {
                continue;
            }
            let Ok(entry) = serde_json::from_value::<Entry>(value) else {
                catalog.skipped += 1;
                continue;
            };
            match entry.read(&key) {
                Some((name, price, window)) => {
                    if window != Window::default() {
                        catalog.windows.insert(name.clone(), window);
                    }
                    catalog.prices.by_prefix.insert(name, price);
                }
                None => catalog.skipped += 1,
            }
        }
        if catalog.prices.by_prefix.is_empty() {
            return Err(fail(
                "the price map prices no chat, completion, embedding or responses model".into(),
            ));
        }
        Ok(catalog)
    }

    /// The context window of `model`: its own entry's, or the entry it is
    /// a snapshot of (as [`PriceTable::price`] finds prices).
    pub fn window(&self, model: &str) -> Option<Window> {
        super::longest_variant(&self.windows, model).map(|(_, w)| *w)
    }
}

impl Entry {
    /// Sluice's name for the entry keyed `key`, its price and window;
    /// `None` for an entry that prices no token of a call.
    fn read(self, key: &str) -> Option<(String, Price, Window)> {
        let mode = self.mode.as_deref().unwrap_or("chat");
        if !MODES.contains(&mode) {
            return None;
        }
        let input = picodollars(self.input_cost_per_token.as_ref()?)?;
        let output = match &self.output_cost_per_token {
            Some(v) => picodollars(v)?,
            // Embeddings price only their input.
            None if mode == "embedding" => 0,
            None => return None,
        };
        let cached_input = match &self.cache_read_input_token_cost {
            Some(v) => picodollars(v)?,
            None => input,
        };
        let window = Window {
            max_input_tokens: self.max_input_tokens.as_ref().and_then(tokens),
            max_output_tokens: self.max_output_tokens.as_ref().and_then(tokens),
        };
        let name = sluice_name(key, self.litellm_provider.as_deref())?;
        Some((
            name,
            Price {
                input,
                output,
                cached_input,
            },
            window,
        ))
    }
}

/// `provider/model` as Sluice routes it, for the entry keyed `key`.
fn sluice_name(key: &str, provider: Option<&str>) -> Option<String> {
    let rename = |p: &str| {
        SLUICE_PROVIDER
            .iter()
            .find(|(from, _)| *from == p)
            .map_or(p, |(_, to)| *to)
            .to_owned()
    };
    // Model names the gateway accepts are at most 256 bytes.
    if key.is_empty() || key.len() > 256 {
        return None;
    }
    match key.split_once('/') {
        Some((p, model)) if !p.is_empty() && !model.is_empty() => {
            Some(format!("{}/{model}", rename(p)))
        }
        _ => Some(format!(
            "{}/{key}",
            rename(provider.filter(|p| !p.is_empty())?)
        )),
    }
}

/// Dollars per token as picodollars per token, rounded to the nearest:
/// `2.5e-06` is 2,500,000. `None` for a negative, non-finite or
/// non-numeric price.
fn picodollars(v: &serde_json::Value) -> Option<u64> {
    let dollars = v.as_f64()?;
    if !dollars.is_finite() || dollars < 0.0 {
        return None;
    }
    let pico = (dollars * 1e12).round();
    // A token priced over $18,000 is not a price.
    (pico < u64::MAX as f64 / 1e3).then_some(pico as u64)
}

/// A token count: a whole, non-negative number.
fn tokens(v: &serde_json::Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Usage;

    #[test]
    fn the_shipped_snapshot_reads_with_sluice_names() {
        let c = Catalog::shipped();
        assert!(c.prices.len() > 1_000, "{} prices", c.prices.len());
        // OpenAI's gpt-4o at $2.50 / $10 per million, cached $1.25.
        let p = c.prices.price("openai/gpt-4o").expect("gpt-4o priced");
        assert_eq!(
            (p.input, p.output, p.cached_input),
            (2_500_000, 10_000_000, 1_250_000)
        );
        // Models the hand-checked table does not have.
        assert!(c.prices.price("openai/gpt-5").is_some());
        assert!(c.prices.price("anthropic/claude-sonnet-4-5").is_some());
        // LiteLLM's `gemini/…` is Sluice's `google/…`.
        assert!(
            c.prices.price("google/gemini-2.5-flash").is_some(),
            "gemini renamed to google"
        );
        assert!(c.prices.price("gemini/gemini-2.5-flash").is_none());
        let w = c.window("openai/gpt-4o").expect("a context window");
        assert_eq!(w.max_input_tokens, Some(128_000));
        // A snapshot of a model has its window.
        assert_eq!(c.window("openai/gpt-4o-2099-01-01"), Some(w));
    }

    #[test]
    fn entries_read_by_mode_and_bad_ones_are_skipped_not_fatal() {
        let json = r#"{
            "sample_spec": {"input_cost_per_token": "text"},
            "_note": "a comment",
            "m-chat": {"litellm_provider": "acme", "mode": "chat",
                "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06,
                "cache_read_input_token_cost": 1e-07, "max_input_tokens": 8192},
            "acme/m-embed": {"litellm_provider": "acme", "mode": "embedding",
                "input_cost_per_token": 2e-08},
            "m-image": {"litellm_provider": "acme", "mode": "image_generation",
                "input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06},
            "m-negative": {"litellm_provider": "acme", "input_cost_per_token": -1,
                "output_cost_per_token": 1e-06},
            "m-no-output": {"litellm_provider": "acme", "mode": "chat",
                "input_cost_per_token": 1e-06},
            "m-no-provider": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06},
            "m-not-an-object": 7
        }"#;
        let c = Catalog::from_litellm_json(json).unwrap();
        assert_eq!(c.prices.len(), 2);
        assert_eq!(c.skipped, 5);
        let p = c.prices.price("acme/m-chat").unwrap();
        assert_eq!(
            (p.input, p.output, p.cached_input),
            (1_000_000, 2_000_000, 100_000)
        );
        let e = c.prices.price("acme/m-embed").unwrap();
        assert_eq!((e.input, e.output, e.cached_input), (20_000, 0, 20_000));
        assert_eq!(
            c.window("acme/m-chat").unwrap().max_input_tokens,
            Some(8192)
        );
        let u = Usage {
            prompt_tokens: 1_000,
            completion_tokens: 1_000,
            total_tokens: 2_000,
        };
        // 1,000 × $1e-6 + 1,000 × $2e-6 = $0.003.
        assert_eq!(
            c.prices.cost("acme/m-chat", &u, 0).unwrap().nanodollars(),
            3_000_000
        );
    }

    #[test]
    fn a_map_that_is_not_one_is_refused_naming_the_setting() {
        for bad in ["[]", "{", "{}", r#"{"x": {"mode": "rerank"}}"#] {
            let e = Catalog::from_litellm_json(bad).unwrap_err();
            assert_eq!(e.field, "pricing.catalog", "{bad}");
        }
        let huge = " ".repeat(MAX_CATALOG_BYTES + 1);
        assert!(
            Catalog::from_litellm_json(&huge)
                .unwrap_err()
                .reason
                .contains("bytes")
        );
    }

    #[test]
    fn prices_round_to_the_nearest_picodollar() {
        use serde_json::json;
        assert_eq!(picodollars(&json!(2.5e-06)), Some(2_500_000));
        assert_eq!(picodollars(&json!(1.5e-05)), Some(15_000_000));
        assert_eq!(picodollars(&json!(0)), Some(0));
        assert_eq!(picodollars(&json!(1e-13)), Some(0));
        assert_eq!(picodollars(&json!(-1e-6)), None);
        assert_eq!(picodollars(&json!("1e-6")), None);
        assert_eq!(picodollars(&json!(1e10)), None);
    }
}
