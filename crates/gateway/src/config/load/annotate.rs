//! `sluice check-config`'s output: the configuration as TOML with where
//! each value came from at the end of its line.

use std::collections::HashMap;

use super::Source;
use super::origins::{KeyPath, Origins, Seg};

/// `toml` (as [`crate::config::Config::to_toml`] writes it: headers, then
/// `key = value` lines, arrays and inline tables on one line) with
/// `# default`, `# file PATH` or `# env VAR` after each value.
pub(super) fn origins(toml: &str, origins: &Origins) -> String {
    let mut out = String::with_capacity(toml.len() * 2);
    // The table the lines below a header belong to.
    let mut table: KeyPath = Vec::new();
    // The current entry of each array of tables, by its header's keys.
    let mut entries: HashMap<Vec<String>, usize> = HashMap::new();
    for line in toml.lines() {
        out.push_str(line);
        let trimmed = line.trim();
        if let Some(header) = trimmed
            .strip_prefix("[[")
            .and_then(|h| h.strip_suffix("]]"))
        {
            let keys = keys(header);
            // A new entry: the arrays nested in the previous one start over.
            entries.retain(|k, _| !(k.len() > keys.len() && k.starts_with(&keys)));
            entries
                .entry(keys.clone())
                .and_modify(|n| *n += 1)
                .or_insert(0);
            table = path_of(&keys, &entries);
        } else if let Some(header) = trimmed.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            table = path_of(&keys(header), &entries);
        } else if let Some((key, _)) = split_key(trimmed) {
            let mut path = table.clone();
            path.push(Seg::Key(key));
            out.push_str(
                match origins.set_by(&path) {
                    Source::Default => "  # default".to_owned(),
                    Source::File(p) => format!("  # file {}", p.display()),
                    Source::Env(var) => format!("  # env {var}"),
                }
                .as_str(),
            );
        }
        out.push('\n');
    }
    out
}

/// The path of the table `keys` names, with the current entry's index
/// after every array of tables it passes through.
fn path_of(keys: &[String], entries: &HashMap<Vec<String>, usize>) -> KeyPath {
    let mut path = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        path.push(Seg::Key(key.clone()));
        if let Some(&n) = entries.get(&keys[..=i]) {
            path.push(Seg::Index(n));
        }
    }
    path
}

/// The keys of a header: `prices."openai/gpt-4o"` is `prices`,
/// `openai/gpt-4o`.
fn keys(header: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut rest = header.trim();
    while !rest.is_empty() {
        let (key, after) = one_key(rest);
        keys.push(key);
        rest = after
            .trim_start()
            .strip_prefix('.')
            .unwrap_or(after)
            .trim_start();
        if after.trim().is_empty() {
            break;
        }
    }
    keys
}

/// The key at the start of `text` (bare or quoted) and what follows it.
fn one_key(text: &str) -> (String, &str) {
    for quote in ['"', '\''] {
        if let Some(body) = text.strip_prefix(quote) {
            let mut escaped = false;
            for (i, c) in body.char_indices() {
                if quote == '"' && c == '\\' && !escaped {
                    escaped = true;
                    continue;
                }
                if c == quote && !escaped {
                    let raw = &body[..i];
                    let key = if quote == '"' {
                        // Quoted keys as TOML writes them: JSON-like escapes.
                        serde_json::from_str::<String>(&format!("\"{raw}\""))
                            .unwrap_or_else(|_| raw.to_owned())
                    } else {
                        raw.to_owned()
                    };
                    return (key, &body[i + 1..]);
                }
                escaped = false;
            }
            return (body.to_owned(), "");
        }
    }
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(text.len());
    (text[..end].to_owned(), &text[end..])
}

/// The key of a `key = value` line.
fn split_key(line: &str) -> Option<(String, &str)> {
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (key, rest) = one_key(line);
    let value = rest.trim_start().strip_prefix('=')?;
    (!key.is_empty()).then_some((key, value))
}

#[cfg(test)]
mod tests {
    use super::keys;

    #[test]
    fn headers_split_into_keys() {
        assert_eq!(keys("retry"), ["retry"]);
        assert_eq!(
            keys("queue.weights.tenants"),
            ["queue", "weights", "tenants"]
        );
        assert_eq!(
            keys(r#"prices."openai/gpt-4o""#),
            ["prices", "openai/gpt-4o"]
        );
        assert_eq!(
            keys(r#"cache.models."a.b".x"#),
            ["cache", "models", "a.b", "x"]
        );
    }
}
