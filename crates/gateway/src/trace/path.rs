//! Turning header values (workspace, thread) into file names that cannot
//! leave the trace directory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Longest file-name component kept as is; longer names are cut and end
/// with a hash of the whole, so two long names stay apart.
const MAX_COMPONENT: usize = 100;

/// `{dir}/{workspace}/{thread}.jsonl`, both parts through
/// [`file_component`]: always a file two levels below `dir`.
pub fn trace_path(dir: &Path, workspace: &str, thread: &str) -> PathBuf {
    let mut file = file_component(thread);
    file.push_str(".jsonl");
    dir.join(file_component(workspace)).join(file)
}

/// A header value as one safe file-name component: ASCII letters, digits,
/// `-`, `_` and `.` stay; every other byte (`/`, `\`, control characters,
/// non-ASCII, `%`) becomes `%XX`, as does a leading `.` (so neither `..`
/// nor a hidden file can come out). Empty becomes `_`; past 100 bytes the
/// name is cut and a 64-bit hash of the whole added. Otherwise the encoding
/// is one-to-one, so two threads do not share a file by accident.
pub fn file_component(value: &str) -> String {
    if value.is_empty() {
        return "_".to_owned();
    }
    let mut out = String::with_capacity(value.len());
    for (i, b) in value.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if plain {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    if out.len() > MAX_COMPONENT {
        // Cut on a whole escape: `out` is ASCII, so any index is a char
        // boundary, but a cut `%2` would read as a different name.
        let mut cut = MAX_COMPONENT;
        while out.as_bytes()[cut - 1] == b'%' || out.as_bytes()[cut - 2] == b'%' {
            cut -= 1;
        }
        out.truncate(cut);
        let _ = write!(out, "-{:016x}", fnv1a(value.as_bytes()));
    }
    out
}

/// FNV-1a, 64 bits: stable across builds and Rust versions, unlike std's
/// hasher, so a thread keeps its file across restarts.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Component;

    #[test]
    fn safe_names_stay_as_they_are() {
        assert_eq!(file_component("acme-prod_2"), "acme-prod_2");
        assert_eq!(file_component("1712345678.123456"), "1712345678.123456");
    }

    #[test]
    fn traversal_and_odd_bytes_are_escaped() {
        assert_eq!(file_component(""), "_");
        assert_eq!(file_component(".."), "%2E.");
        assert_eq!(file_component("."), "%2E");
        assert_eq!(file_component("../etc/passwd"), "%2E.%2Fetc%2Fpasswd");
        assert_eq!(file_component("a\\b"), "a%5Cb");
        assert_eq!(file_component("a\nb\0"), "a%0Ab%00");
        assert_eq!(file_component("100%"), "100%25");
        assert_eq!(file_component("é"), "%C3%A9");
        assert_ne!(file_component("a/b"), file_component("a_b"));
    }

    #[test]
    fn long_names_are_cut_and_kept_apart() {
        let a = file_component(&"x".repeat(500));
        let b = file_component(&format!("{}y", "x".repeat(499)));
        assert!(a.len() <= MAX_COMPONENT + 17, "{a}");
        assert_ne!(a, b);
        let escaped = file_component(&"/".repeat(200));
        assert!(escaped.len() <= MAX_COMPONENT + 17);
        let stem = escaped.rsplit_once('-').unwrap().0;
        assert_eq!(stem.len() % 3, 0, "cut inside an escape: {stem}");
    }

    #[test]
    fn trace_paths_stay_two_levels_below_dir() {
        let dir = Path::new("/var/traces");
        for (ws, thread) in [
            ("..", ".."),
            ("../..", "../../etc/passwd"),
            ("/abs", "/abs"),
            ("", ""),
            ("a/../../b", "c\0d"),
        ] {
            let p = trace_path(dir, ws, thread);
            let rest = p.strip_prefix(dir).unwrap();
            let parts: Vec<_> = rest.components().collect();
            assert_eq!(parts.len(), 2, "{p:?}");
            assert!(
                parts.iter().all(|c| matches!(c, Component::Normal(_))),
                "{p:?}"
            );
        }
    }
}
