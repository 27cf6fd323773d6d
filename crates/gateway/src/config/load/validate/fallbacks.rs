//! Checks of the fallback chains: every model has a provider, no cycles.

use std::collections::{BTreeMap, HashMap};

use super::{Checks, key};
use crate::config::load::{ConfigError, Seg};
use crate::config::{Config, WireFormat};

pub(super) fn fallbacks(c: &Checks<'_>, config: &Config) -> Result<(), ConfigError> {
    let path = |model: &str| key(&["fallbacks", model]);
    for (model, chain) in &config.fallbacks {
        let named =
            std::iter::once((path(model), model)).chain(chain.iter().enumerate().map(|(j, m)| {
                let mut p = path(model);
                p.push(Seg::Index(j));
                (p, m)
            }));
        let format = serving(config, model).map(|p| p.format);
        for (at, m) in named {
            let Some(p) = serving(config, m) else {
                return Err(c.fail(
                    at,
                    format!("no provider serves `{m}`: a model is named `{{provider}}/{{model}}`"),
                ));
            };
            // The gateway passes request bodies through: a fallback must
            // speak the same wire format as the model it stands in for,
            // or, for an OpenAI model, answer its chat calls by translation
            // (its other calls skip that fallback).
            let translates = format == Some(WireFormat::Openai) && p.format != WireFormat::Openai;
            if format.is_some_and(|f| f != p.format) && !translates {
                return Err(c.fail(
                    at,
                    format!(
                        "`{m}` is served in another wire format than `{model}` ({})",
                        p.name
                    ),
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(&config.fallbacks) {
        return Err(c.fail(
            path(&cycle[0]),
            format!("fallbacks form a cycle: {}", cycle.join(" → ")),
        ));
    }
    Ok(())
}

/// The provider serving `model`: a pool's first deployment's, else the
/// one its prefix names.
fn serving<'c>(config: &'c Config, model: &str) -> Option<&'c crate::config::ProviderConfig> {
    match config.pool_index(model) {
        Some(i) => config.pools[i]
            .deployments
            .first()
            .and_then(|d| config.provider_named(&d.provider))
            .map(|i| &config.providers[i]),
        None => config.provider_for(model),
    }
}

/// A cycle in the fallback chains, as the models along it (the first again
/// at the end), if there is one.
fn find_cycle(chains: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'a>(
        model: &'a str,
        chains: &'a BTreeMap<String, Vec<String>>,
        marks: &mut HashMap<&'a str, Mark>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match marks.get(model) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|m| *m == model).unwrap_or(0);
                let mut cycle: Vec<String> =
                    stack[from..].iter().map(|m| (*m).to_owned()).collect();
                cycle.push(model.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(model, Mark::Open);
        stack.push(model);
        for next in chains.get(model).into_iter().flatten() {
            if let Some(cycle) = visit(next, chains, marks, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        marks.insert(model, Mark::Done);
        None
    }
    let mut marks = HashMap::new();
    chains
        .keys()
        .find_map(|model| visit(model, chains, &mut marks, &mut Vec::new()))
}
