//! Key paths, and where each value came from.

use super::Source;

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    /// A table key.
    Key(String),
    /// A list position.
    Index(usize),
}

/// A key path such as `providers[1].format`.
pub(super) type KeyPath = Vec<Seg>;

pub(super) fn key_path(path: &serde_path_to_error::Path) -> KeyPath {
    use serde_path_to_error::Segment;
    path.iter()
        .map(|s| match s {
            Segment::Seq { index } => Seg::Index(*index),
            Segment::Map { key } => Seg::Key(key.clone()),
            Segment::Enum { variant } => Seg::Key(variant.clone()),
            Segment::Unknown => Seg::Key("?".into()),
        })
        .collect()
}

/// Shows a path as TOML would write it: `providers[1].format`,
/// `fallbacks."openai/gpt-4o"`.
pub(super) fn show(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                let bare = !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if bare {
                    out.push_str(k);
                } else {
                    out.push_str(&format!("{k:?}"));
                }
            }
        }
    }
    out
}

/// Where each value set by the file or the environment came from.
#[derive(Debug, Clone, Default)]
pub(super) struct Origins {
    /// (path in the merged config, source, the path as the source wrote it).
    /// They differ for list entries: a file's `providers[0]` may be the
    /// merged list's `providers[5]`.
    set: Vec<(KeyPath, Source, KeyPath)>,
    /// Tables and list entries a source created, as `set`: an error about
    /// what one lacks (a missing field) is that source's, but the values
    /// serde fills in for it are defaults.
    created: Vec<(KeyPath, Source, KeyPath)>,
}

impl Origins {
    pub(super) fn record(&mut self, at: KeyPath, source: Source, written: KeyPath) {
        self.set.push((at, source, written));
    }

    /// Records a table or list entry that `source` created.
    pub(super) fn created(&mut self, at: KeyPath, source: Source, written: KeyPath) {
        self.created.push((at, source, written));
    }

    /// The source of the value at `path` (the latest record of its longest
    /// recorded prefix, created tables included) and the path as that
    /// source wrote it.
    pub(super) fn locate(&self, path: &[Seg]) -> (Source, String) {
        self.set
            .iter()
            .chain(&self.created)
            .enumerate()
            .filter(|(_, (at, _, _))| path.starts_with(at))
            .max_by_key(|(i, (at, _, _))| (at.len(), *i))
            .map_or_else(
                || (Source::Default, show(path)),
                |(_, (at, source, written))| {
                    let mut shown = written.clone();
                    shown.extend_from_slice(&path[at.len()..]);
                    (source.clone(), show(&shown))
                },
            )
    }

    /// Who set the value at `path`: the latest source that wrote it or a
    /// value containing it (an array, a whole entry), else the defaults
    /// (serde's included).
    pub(super) fn set_by(&self, path: &[Seg]) -> Source {
        self.set
            .iter()
            .enumerate()
            .filter(|(_, (at, _, _))| path.starts_with(at))
            .max_by_key(|(i, (at, _, _))| (at.len(), *i))
            .map_or(Source::Default, |(_, (_, source, _))| source.clone())
    }
}
