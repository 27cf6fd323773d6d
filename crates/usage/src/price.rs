//! What a call cost: per-model prices (input, output, cached input) and
//! exact integer arithmetic, so that millions of records sum to the cent
//! they should (no floats). Prices are kept in picodollars per token (a
//! dollar per million tokens is 1,000,000 of them: every price published
//! to the millionth of a dollar per million tokens is whole), costs in
//! nanodollars (a u64 holds $18 billion).
//!
//! ```
//! use sluice_usage::{PriceTable, Usage};
//!
//! let prices = PriceTable::defaults();
//! let u = Usage { prompt_tokens: 1_000, completion_tokens: 500, total_tokens: 1_500 };
//! // gpt-4o-mini: $0.15 and $0.60 per million tokens.
//! let cost = prices.cost("openai/gpt-4o-mini-2024-07-18", &u, 0).unwrap();
//! assert_eq!(cost.nanodollars(), 450_000);
//! assert_eq!(cost.to_string(), "$0.000450000");
//! ```

mod catalog;

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

pub use catalog::{Catalog, MAX_CATALOG_BYTES, Window};

/// The prices shipped for the default providers' models.
const DEFAULTS: &str = include_str!("../prices.json");

/// A model's prices, in picodollars per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    /// Per input (prompt) token.
    pub input: u64,
    /// Per output (completion) token.
    pub output: u64,
    /// Per input token read from the provider's prompt cache (the input
    /// price when the provider has no such price).
    pub cached_input: u64,
}

impl Price {
    /// Prices given in dollars per million tokens, as decimal strings
    /// (`"0.15"`), at most six decimals.
    ///
    /// # Errors
    /// [`PriceError`] naming the field.
    pub fn per_million(
        input: &str,
        output: &str,
        cached_input: Option<&str>,
    ) -> Result<Price, PriceError> {
        let input = micros("input", input)?;
        Ok(Price {
            input,
            output: micros("output", output)?,
            cached_input: cached_input
                .map(|c| micros("cached_input", c))
                .transpose()?
                .unwrap_or(input),
        })
    }
}

impl Price {
    /// What `usage` cost at this price, `cached_prompt` of its prompt
    /// tokens read from the provider's cache. Rounded once, to the
    /// nearest nanodollar.
    pub fn cost(&self, usage: &crate::Usage, cached_prompt: u64) -> Cost {
        let cached = cached_prompt.min(usage.prompt_tokens);
        let pico = u128::from(usage.prompt_tokens - cached) * u128::from(self.input)
            + u128::from(cached) * u128::from(self.cached_input)
            + u128::from(usage.completion_tokens) * u128::from(self.output);
        let nanos = (pico + 500) / 1_000;
        Cost(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// A cost, in nanodollars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Cost(u64);

impl Cost {
    /// A cost of `n` nanodollars.
    pub const fn from_nanodollars(n: u64) -> Cost {
        Cost(n)
    }

    /// In nanodollars.
    pub const fn nanodollars(self) -> u64 {
        self.0
    }

    /// The sum, saturating.
    #[must_use]
    pub const fn saturating_add(self, other: Cost) -> Cost {
        Cost(self.0.saturating_add(other.0))
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "${}.{:09}",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}

/// Why a price does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct PriceError {
    /// The field (`openai/gpt-4o.input`).
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

/// `s` dollars per million tokens as picodollars per token: the decimal
/// string times 10^6, exactly.
fn micros(field: &str, s: &str) -> Result<u64, PriceError> {
    let bad = |reason: &str| PriceError {
        field: field.to_owned(),
        reason: format!("{reason} (dollars per million tokens, e.g. \"0.15\"), not {s:?}"),
    };
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(frac.is_empty() || digits(frac)) {
        return Err(bad("must be a decimal number"));
    }
    if frac.len() > 6 {
        return Err(bad("at most six decimals"));
    }
    let whole: u64 = whole.parse().map_err(|_| bad("too large"))?;
    let frac: u64 = format!("{frac:0<6}")
        .parse()
        .map_err(|_| bad("too large"))?;
    whole
        .checked_mul(1_000_000)
        .and_then(|w| w.checked_add(frac))
        .ok_or_else(|| bad("too large"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    input: String,
    output: String,
    #[serde(default)]
    cached_input: Option<String>,
}

/// Prices by model prefix; the longest prefix of a model wins. A table
/// may lie over another ([`PriceTable::over`]): a model priced in the
/// upper one takes that price, whatever the lower one has (a price of
/// yours for `openai/gpt-4o` prices its snapshots too, even where the
/// price map under it lists them one by one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceTable {
    by_prefix: BTreeMap<String, Price>,
    under: Option<Box<PriceTable>>,
}

impl PriceTable {
    /// The prices shipped for the default providers' models (the file
    /// `crates/usage/prices.json`).
    ///
    /// # Panics
    /// Never: the file is checked by this crate's tests.
    pub fn defaults() -> PriceTable {
        PriceTable::from_json(DEFAULTS).expect("prices.json reads")
    }

    /// A table from JSON: `{"prefix": {"input": "0.15", "output": "0.60",
    /// "cached_input": "0.075"}}` in dollars per million tokens; keys
    /// starting with `_` are comments.
    ///
    /// # Errors
    /// [`PriceError`] naming the entry and field.
    pub fn from_json(json: &str) -> Result<PriceTable, PriceError> {
        let raw: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(json).map_err(|e| PriceError {
                field: "prices".into(),
                reason: e.to_string(),
            })?;
        let mut table = PriceTable::default();
        for (prefix, v) in raw {
            if prefix.starts_with('_') {
                continue;
            }
            let e: Entry = serde_json::from_value(v).map_err(|e| PriceError {
                field: prefix.clone(),
                reason: e.to_string(),
            })?;
            let at = |f: &str| format!("{prefix}.{f}");
            let price = Price {
                input: micros(&at("input"), &e.input)?,
                output: micros(&at("output"), &e.output)?,
                cached_input: match &e.cached_input {
                    Some(c) => micros(&at("cached_input"), c)?,
                    None => micros(&at("input"), &e.input)?,
                },
            };
            table.by_prefix.insert(prefix, price);
        }
        Ok(table)
    }

    /// This table with `prefix` priced at `price` (over a shipped price).
    #[must_use]
    pub fn with(mut self, prefix: impl Into<String>, price: Price) -> PriceTable {
        self.by_prefix.insert(prefix.into(), price);
        self
    }

    /// This table over `base`: a model this table prices takes its
    /// price; `base` prices the rest.
    #[must_use]
    pub fn over(mut self, base: PriceTable) -> PriceTable {
        self.under = Some(Box::new(match self.under.take() {
            Some(under) => under.over(base),
            None => base,
        }));
        self
    }

    /// How many prefixes are priced, in every layer.
    pub fn len(&self) -> usize {
        self.by_prefix.len() + self.under.as_ref().map_or(0, |u| u.len())
    }

    /// Whether nothing is priced.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every priced prefix and its price, the upper layer's first, each
    /// layer in name order (a prefix priced in two layers comes twice).
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&str, &Price)> + '_> {
        let top = self.by_prefix.iter().map(|(p, price)| (p.as_str(), price));
        match &self.under {
            Some(under) => Box::new(top.chain(under.iter())),
            None => Box::new(top),
        }
    }

    /// The price of `model`: its longest priced prefix that names it or a
    /// snapshot of it ([`names_variant`]). `openai/gpt-4o` prices
    /// `openai/gpt-4o-2024-08-06`, but not `openai/gpt-4o-realtime-preview`
    /// (another model, which costs more): a model name that merely starts
    /// like a cheaper one has no price of its own, rather than the cheaper
    /// one's.
    pub fn price(&self, model: &str) -> Option<&Price> {
        self.priced_by(model).map(|(_, price)| price)
    }

    /// The prefix that prices `model` (as [`PriceTable::price`] finds it)
    /// and its price: where a price came from.
    pub fn priced_by(&self, model: &str) -> Option<(&str, &Price)> {
        longest_variant(&self.by_prefix, model)
            .or_else(|| self.under.as_ref().and_then(|u| u.priced_by(model)))
    }

    /// What `usage` of `model` cost, `cached_prompt` of its prompt tokens
    /// read from the provider's cache; `None` for a model without a price.
    /// Rounded once, to the nearest nanodollar.
    pub fn cost(&self, model: &str, usage: &crate::Usage, cached_prompt: u64) -> Option<Cost> {
        Some(self.price(model)?.cost(usage, cached_prompt))
    }
}

/// The entry of `map` under the longest key that [`names_variant`]
/// `model`. Only the prefixes of `model` that end where a variant may
/// begin are looked up (the whole name, before a `-` or `@`, after a
/// separator), a handful of map lookups whatever the map's size (the
/// price map has thousands of entries).
fn longest_variant<'a, T>(map: &'a BTreeMap<String, T>, model: &str) -> Option<(&'a str, &'a T)> {
    let bytes = model.as_bytes();
    (1..=bytes.len())
        .rev()
        .filter(|&end| {
            end == bytes.len()
                || matches!(bytes[end], b'-' | b'@')
                || matches!(bytes[end - 1], b'/' | b'-' | b':' | b'.' | b'@')
        })
        .filter(|&end| model.is_char_boundary(end))
        .find_map(|end| {
            let prefix = &model[..end];
            map.get_key_value(prefix)
                .filter(|_| names_variant(prefix, model))
                .map(|(k, v)| (k.as_str(), v))
        })
}

/// Whether the priced `prefix` covers `model`: `model` is `prefix`, or
/// `prefix` and then a snapshot's suffix (`-` and a digit, as in
/// `-2024-08-06` or `-20241022` or `-001`; `-latest`; `@…`), or `prefix`
/// ends in a separator (`/`, `-`, `:`, `.`, `@`) and so names a family on
/// purpose (`openai/` prices every OpenAI model).
fn names_variant(prefix: &str, model: &str) -> bool {
    let Some(rest) = model.strip_prefix(prefix) else {
        return false;
    };
    if rest.is_empty() || prefix.ends_with(['/', '-', ':', '.', '@']) {
        return true;
    }
    let mut chars = rest.chars();
    match chars.next() {
        Some('@') => true,
        Some('-') => {
            let after = chars.as_str();
            after.starts_with(|c: char| c.is_ascii_digit()) || after == "latest"
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Usage;

    #[test]
    fn a_prefix_prices_its_snapshots_not_other_models_that_start_like_it() {
        let t = PriceTable::defaults();
        let gpt4o = t.price("openai/gpt-4o").copied();
        assert!(gpt4o.is_some());
        for snapshot in [
            "openai/gpt-4o-2024-08-06",
            "openai/gpt-4o-latest",
            "openai/gpt-4o@2024",
        ] {
            assert_eq!(t.price(snapshot).copied(), gpt4o, "{snapshot}");
        }
        // Costlier models whose names start like a cheaper one: no price
        // of their own, not the cheaper one's (issue 33).
        for other in [
            "openai/gpt-4o-realtime-preview",
            "openai/gpt-4o-audio-preview",
            "openai/gpt-4opus",
            "anthropic/claude-3-5-haiku-pro",
        ] {
            assert_eq!(t.price(other), None, "{other}");
        }
        // A family priced on purpose by a prefix that ends in a separator.
        let family = t.clone().with(
            "acme/",
            Price {
                input: 1,
                output: 1,
                cached_input: 1,
            },
        );
        assert!(family.price("acme/anything-at-all").is_some());
    }

    fn usage(prompt: u64, completion: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
        }
    }

    #[test]
    fn the_shipped_prices_read_and_the_longest_prefix_wins() {
        let t = PriceTable::defaults();
        assert_eq!(t.price("openai/gpt-4o").unwrap().input, 2_500_000);
        assert_eq!(t.price("openai/gpt-4o-mini").unwrap().input, 150_000);
        assert_eq!(
            t.price("openai/gpt-4o-2024-08-06").unwrap().output,
            10_000_000
        );
        assert_eq!(
            t.price("openai/gpt-4o-mini-2024-07-18").unwrap().output,
            600_000
        );
        assert_eq!(t.price("openai/gpt-3.5-turbo"), None);
        assert_eq!(t.price("zzz"), None);
        assert_eq!(t.price(""), None);
        // No cached price: the input price.
        let e = t.price("openai/text-embedding-3-small").unwrap();
        assert_eq!(e.cached_input, e.input);
    }

    #[test]
    fn costs_are_exact_and_sum_without_drift() {
        let t = PriceTable::defaults();
        // 1 prompt token of gpt-4o-mini: 150,000 picodollars = 150 nano.
        assert_eq!(
            t.cost("openai/gpt-4o-mini", &usage(1, 0), 0),
            Some(Cost(150))
        );
        // A million calls of 1,000 in and 500 out: exactly $450.
        let one = t.cost("openai/gpt-4o-mini", &usage(1_000, 500), 0).unwrap();
        let mut sum = Cost::default();
        for _ in 0..1_000_000 {
            sum = sum.saturating_add(one);
        }
        assert_eq!(sum.to_string(), "$450.000000000");
        // Cached prompt tokens at their own price, never more than the prompt.
        let c = t
            .cost("anthropic/claude-3-5-haiku", &usage(1_000, 0), 400)
            .unwrap();
        assert_eq!(c.nanodollars(), 600 * 800 + 400 * 80);
        let all = t
            .cost("anthropic/claude-3-5-haiku", &usage(1_000, 0), 5_000)
            .unwrap();
        assert_eq!(all.nanodollars(), 1_000 * 80);
        assert_eq!(t.cost("unknown/model", &usage(1, 1), 0), None);
    }

    #[test]
    fn bad_prices_name_the_field() {
        for (json, field) in [
            (r#"{"m": {"input": "0.1.2", "output": "1"}}"#, "m.input"),
            (r#"{"m": {"input": "1", "output": "-1"}}"#, "m.output"),
            (
                r#"{"m": {"input": "1", "output": "1", "cached_input": "0.0000001"}}"#,
                "m.cached_input",
            ),
            (r#"{"m": {"input": "1"}}"#, "m"),
            (r#"{"m": {"input": "1", "output": "1", "extra": "1"}}"#, "m"),
        ] {
            let e = PriceTable::from_json(json).unwrap_err();
            assert_eq!(e.field, field, "{json}: {e}");
        }
        let p = Price::per_million("3", "15.5", None).unwrap();
        assert_eq!(
            (p.input, p.output, p.cached_input),
            (3_000_000, 15_500_000, 3_000_000)
        );
        let t = PriceTable::default().with("x/", p);
        assert_eq!(t.price("x/y"), Some(&p));
    }
}
