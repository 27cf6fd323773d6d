//! Metric handles resolved once per label values. The `counter!` and
//! `histogram!` macros copy their label strings into a key, bound the
//! configured-name labels (a lock and a hash each) and look the key up in
//! the recorder's registry at every sample; a proxied request records
//! about ten samples, nearly always with label values seen before. A
//! [`Handles`] keeps the handle each combination resolved to, found again
//! with one hash of the raw values and no allocation.
//!
//! Handles stay valid because the recorder never forgets a metric (no
//! idle timeout is configured, see `build_and_install`). Before the
//! recorder is installed nothing is kept: a handle resolved then would
//! count nowhere for good.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use foldhash::fast::RandomState;

/// Combinations kept per metric; past it, samples resolve their handle
/// each time as before (label values are bounded anyway, see
/// [`super::LabelValues`], but the raw values that map to `_other` are
/// not).
const MAX_ENTRIES: usize = 4096;

/// The longest key kept, in bytes: a length byte and the value per label.
const MAX_KEY: usize = 400;

/// The handles of one metric, by label values.
#[derive(Debug)]
pub(crate) struct Handles<H> {
    /// foldhash, not SipHash: about ten lookups a request, of short keys.
    map: RwLock<HashMap<Box<[u8]>, H, RandomState>>,
}

impl<H: Clone> Handles<H> {
    pub(crate) fn new() -> Self {
        Handles {
            map: RwLock::new(HashMap::default()),
        }
    }

    /// The handle for `labels` (raw values, in a fixed order), from
    /// `resolve` the first time.
    pub(crate) fn get(&self, labels: &[&[u8]], resolve: impl FnOnce() -> H) -> H {
        let mut buf = [0u8; MAX_KEY];
        let Some(key) = super::installed()
            .then(|| encode(labels, &mut buf))
            .flatten()
        else {
            return resolve();
        };
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = map.get(key) {
            return h.clone();
        }
        drop(map);
        let h = resolve();
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.len() < MAX_ENTRIES {
            map.entry(key.into()).or_insert_with(|| h.clone());
        }
        h
    }
}

/// `labels` as one key: each value after its length, so that no two
/// combinations share a key. `None` when a value or the whole is too long.
fn encode<'a>(labels: &[&[u8]], buf: &'a mut [u8; MAX_KEY]) -> Option<&'a [u8]> {
    let mut at = 0;
    for value in labels {
        let len = u8::try_from(value.len()).ok()?;
        let end = at + 1 + value.len();
        buf.get_mut(at..end)?.split_first_mut().map(|(l, rest)| {
            *l = len;
            rest.copy_from_slice(value);
        })?;
        at = end;
    }
    Some(&buf[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_tell_every_combination_apart() {
        let (mut a, mut b) = ([0u8; MAX_KEY], [0u8; MAX_KEY]);
        let ab_c = encode(&[b"ab", b"c"], &mut a).map(<[u8]>::to_vec);
        let a_bc = encode(&[b"a", b"bc"], &mut b).map(<[u8]>::to_vec);
        assert_ne!(ab_c, a_bc);
        assert!(encode(&[&[b'x'; 256]], &mut a).is_none());
        assert!(encode(&[&[b'x'; 200], &[b'y'; 200]], &mut a).is_none());
    }

    #[test]
    fn a_combination_resolves_once_when_the_recorder_is_installed() {
        super::super::Metrics::install(false).unwrap();
        let handles = Handles::new();
        let mut resolved = 0;
        for _ in 0..3 {
            let got = handles.get(&[b"m", b"200"], || {
                resolved += 1;
                resolved
            });
            assert_eq!(got, 1);
        }
        assert_eq!(handles.get(&[b"m", b"500"], || 7), 7);
        assert_eq!(resolved, 1);
    }
}
