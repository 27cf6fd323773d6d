//! Merging the file over the defaults.
//!
//! Tables merge key by key, so `[retry] max_attempts = 5` keeps the other
//! retry defaults. The lists of providers, APIs and models merge entry by
//! entry on their key: a file entry replaces the default with the same key
//! and keeps the others. Any other value replaces the default whole.

use toml::{Table, Value};

use super::{KeyPath, Origins, Seg, Source};

/// Top-level lists merged by entry, and the field that names an entry.
pub(super) const KEYED_LISTS: &[(&str, &str)] = &[
    ("providers", "name"),
    ("apis", "name"),
    ("models", "prefix"),
];

/// The field naming the entries of the top-level list `key`, if it is one
/// merged by entry.
pub(super) fn entry_key(key: &str) -> Option<&'static str> {
    KEYED_LISTS
        .iter()
        .find(|(list, _)| *list == key)
        .map(|(_, field)| *field)
}

/// Merges `over` (from `source`) into `base`, recording where each value
/// came from.
pub(super) fn merge(base: &mut Table, over: Table, source: &Source, origins: &mut Origins) {
    merge_table(base, over, &mut Vec::new(), source, origins);
}

fn merge_table(
    base: &mut Table,
    over: Table,
    path: &mut KeyPath,
    source: &Source,
    origins: &mut Origins,
) {
    for (key, value) in over {
        path.push(Seg::Key(key.clone()));
        let field = if path.len() == 1 {
            entry_key(&key)
        } else {
            None
        };
        match (base.get_mut(&key), value, field) {
            (Some(Value::Array(list)), Value::Array(entries), Some(field)) => {
                merge_entries(list, entries, field, path, source, origins);
            }
            (Some(Value::Table(base)), Value::Table(over), _) => {
                merge_table(base, over, path, source, origins);
            }
            (_, value, _) => {
                origins.record(path.clone(), source.clone(), path.clone());
                base.insert(key, value);
            }
        }
        path.pop();
    }
}

fn merge_entries(
    list: &mut Vec<Value>,
    entries: Vec<Value>,
    field: &str,
    path: &KeyPath,
    source: &Source,
    origins: &mut Origins,
) {
    let name = |v: &Value| v.get(field).and_then(Value::as_str).map(str::to_owned);
    // Only defaults are replaced: two file entries with one name both stay,
    // so that the checks report the duplicate instead of one hiding it.
    let mut replaceable: Vec<Option<String>> = list.iter().map(name).collect();
    for (i, entry) in entries.into_iter().enumerate() {
        let slot =
            name(&entry).and_then(|n| replaceable.iter().position(|r| r.as_deref() == Some(&n)));
        let at = match slot {
            Some(j) => {
                replaceable[j] = None;
                list[j] = entry;
                j
            }
            None => {
                list.push(entry);
                list.len() - 1
            }
        };
        let with = |index| {
            let mut p = path.clone();
            p.push(Seg::Index(index));
            p
        };
        origins.record(with(at), source.clone(), with(i));
    }
}
