//! Merging the file over the defaults.
//!
//! Tables merge key by key, so `[retry] max_attempts = 5` keeps the other
//! retry defaults. The lists of providers, APIs and models merge entry by
//! entry on their key, and an entry naming a default merges over it field
//! by field: `[[providers]] name = "anthropic" base_url = "…"` keeps the
//! built-in's format, key variable and prefixes. A model entry that sets
//! its own rate or burst is no longer a guess (`guess = false` unless it
//! says otherwise): a rate you configure is a ceiling. Any other value
//! replaces the default whole.

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
            (None, Value::Table(over), None) => {
                // A table the defaults lack (`[redis]`): created by this
                // source, its values recorded one by one.
                origins.created(path.clone(), source.clone(), path.clone());
                let mut created = Table::new();
                merge_table(&mut created, over, path, source, origins);
                base.insert(key, Value::Table(created));
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
        let at = match (slot, entry) {
            (Some(j), Value::Table(fields)) => {
                replaceable[j] = None;
                let own_rate = field == "prefix"
                    && (fields.contains_key("requests_per_second") || fields.contains_key("burst"))
                    && !fields.contains_key("guess");
                let mut at = path.clone();
                at.push(Seg::Index(j));
                let mut written = path.clone();
                written.push(Seg::Index(i));
                if let Some(Value::Table(default)) = list.get_mut(j) {
                    for (key, value) in fields {
                        at.push(Seg::Key(key.clone()));
                        written.push(Seg::Key(key.clone()));
                        origins.record(at.clone(), source.clone(), written.clone());
                        default.insert(key, value);
                        at.pop();
                        written.pop();
                    }
                    if own_rate {
                        default.insert("guess".into(), Value::Boolean(false));
                        at.push(Seg::Key("guess".into()));
                        origins.record(at.clone(), source.clone(), written.clone());
                    }
                }
                continue;
            }
            (Some(j), entry) => {
                replaceable[j] = None;
                list[j] = entry;
                j
            }
            (None, Value::Table(fields)) => {
                // A new entry: created here, its fields recorded one by
                // one (serde's defaults for the rest are defaults).
                let mut at = path.clone();
                at.push(Seg::Index(list.len()));
                let mut written = path.clone();
                written.push(Seg::Index(i));
                origins.created(at.clone(), source.clone(), written.clone());
                let mut created = Table::new();
                for (key, value) in fields {
                    at.push(Seg::Key(key.clone()));
                    written.push(Seg::Key(key.clone()));
                    origins.record(at.clone(), source.clone(), written.clone());
                    created.insert(key, value);
                    at.pop();
                    written.pop();
                }
                list.push(Value::Table(created));
                continue;
            }
            (None, entry) => {
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
