//! Bounding the values of labels that name configured things.

use std::collections::HashSet;
use std::sync::RwLock;

use foldhash::fast::RandomState;

use super::{MAX_LABEL_LEN, OTHER};

/// A bounded set of label values: the first `max` distinct values of at
/// most [`MAX_LABEL_LEN`] bytes pass, everything else becomes [`OTHER`].
#[derive(Debug)]
pub struct LabelValues {
    max: usize,
    seen: RwLock<HashSet<Box<str>, RandomState>>,
}

impl LabelValues {
    /// An empty set admitting at most `max` distinct values.
    pub fn new(max: usize) -> LabelValues {
        LabelValues {
            max,
            seen: RwLock::new(HashSet::default()),
        }
    }

    /// `value` if it is known or there is room for it, else [`OTHER`].
    pub fn admit(&self, value: &str) -> String {
        if value.len() > MAX_LABEL_LEN {
            return OTHER.to_owned();
        }
        // A poisoned lock only means a panic elsewhere while inserting a
        // string; the set is still a valid set.
        let seen = self.seen.read().unwrap_or_else(|e| e.into_inner());
        if seen.contains(value) {
            return value.to_owned();
        }
        drop(seen);
        let mut seen = self.seen.write().unwrap_or_else(|e| e.into_inner());
        if seen.len() < self.max || seen.contains(value) {
            seen.insert(value.into());
            return value.to_owned();
        }
        OTHER.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_bounded() {
        let values = LabelValues::new(2);
        assert_eq!(values.admit("a"), "a");
        assert_eq!(values.admit("b"), "b");
        assert_eq!(values.admit("c"), OTHER);
        assert_eq!(values.admit("a"), "a");
        assert_eq!(values.admit(&"x".repeat(MAX_LABEL_LEN + 1)), OTHER);
    }
}
