//! What a batch of records adds to the rollups: one delta per
//! granularity, bucket, tenant, key, model and feature, in key order (so
//! that concurrent writers lock rows in the same order).

use std::collections::BTreeMap;

use crate::{Granularity, Record};

/// A rollup row's key, borrowed from the batch's records (a record adds
/// to three rows: copying its strings for each would be most of the
/// rollups' cost).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key<'a> {
    pub granularity: &'static str,
    pub bucket_ms: i64,
    pub tenant: &'a str,
    pub key_id: &'a str,
    pub model: &'a str,
    pub feature: &'a str,
}

/// What a batch adds to one rollup row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Delta {
    pub requests: u64,
    pub errors: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub reasoning_tokens: u64,
    pub unpriced: u64,
    pub cost_nanos: u64,
}

impl Delta {
    fn add(&mut self, r: &Record) {
        self.requests += 1;
        self.errors += u64::from(r.is_error());
        self.prompt_tokens = self.prompt_tokens.saturating_add(r.prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(r.completion_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(r.cached_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(r.reasoning_tokens);
        self.unpriced += u64::from(r.unpriced);
        self.cost_nanos = self.cost_nanos.saturating_add(r.cost_nanos);
    }
}

/// The deltas of `records`, in key order.
pub(crate) fn deltas<'a>(
    records: impl IntoIterator<Item = &'a Record>,
) -> BTreeMap<Key<'a>, Delta> {
    let mut out = BTreeMap::new();
    for r in records {
        for g in Granularity::STORED {
            let key = Key {
                granularity: g.as_str(),
                bucket_ms: g.bucket(r.at_ms),
                tenant: &r.tenant,
                key_id: r.key_id.as_deref().unwrap_or_default(),
                model: &r.model,
                feature: r.feature.as_deref().unwrap_or_default(),
            };
            out.entry(key).or_insert_with(Delta::default).add(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_adds_one_delta_per_bucket_and_group() {
        let mut a = Record::new("1", "acme", "model", "openai", "m", "/v1/chat/completions");
        a.at_ms = 90_000;
        a.prompt_tokens = 10;
        a.cost_nanos = 7;
        a.status = 200;
        let mut b = a.clone();
        b.at_ms = 130_000; // the next minute, the same hour and day
        b.status = 500;
        let mut c = a.clone();
        c.feature = Some("search".into());
        let records = [a, b, c];
        let d = deltas(&records);
        // minute: 60_000 (a), 120_000 (b), 60_000+search (c); hour and
        // day: one plain, one with the feature.
        assert_eq!(d.len(), 3 + 2 + 2);
        let hour = Key {
            granularity: "hour",
            bucket_ms: 0,
            tenant: "acme",
            key_id: "",
            model: "m",
            feature: "",
        };
        assert_eq!(
            d[&hour],
            Delta {
                requests: 2,
                errors: 1,
                prompt_tokens: 20,
                cost_nanos: 14,
                ..Delta::default()
            }
        );
        assert_eq!(Granularity::Day.bucket(-1), -86_400_000);
    }
}
