//! Where a trace goes: `{dir}/{workspace}/{period}.jsonl`, the workspace
//! turned into a file name that cannot leave the trace directory and the
//! period (a UTC day or hour) taken from the trace's own start, so the
//! writer never reads a clock.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Longest file-name component kept as is; longer names are cut and end
/// with a hash of the whole, so two long names stay apart.
const MAX_COMPONENT: usize = 100;

/// How often a workspace starts a new trace file (`trace.rotate`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rotation {
    /// A file per UTC hour: `2025-01-31T13.jsonl`.
    Hour,
    /// A file per UTC day: `2025-01-31.jsonl`.
    #[default]
    Day,
}

/// `{dir}/{workspace}`, the workspace through [`file_component`]: always
/// a directory one level below `dir`.
pub fn workspace_dir(dir: &Path, workspace: &str) -> PathBuf {
    dir.join(file_component(workspace))
}

impl Rotation {
    /// How long a period lasts: traces whose start divided by it is the
    /// same share a period (UTC hours and days are whole multiples of it
    /// since the epoch).
    pub(crate) fn millis(self) -> u64 {
        match self {
            Rotation::Hour => 3_600_000,
            Rotation::Day => 86_400_000,
        }
    }
}

/// The period a trace started in, as its file names it: `2025-01-31`
/// ([`Rotation::Day`]) or `2025-01-31T13` ([`Rotation::Hour`]), UTC.
pub fn period(started_unix_ms: u64, rotation: Rotation) -> String {
    let secs = i64::try_from(started_unix_ms / 1_000).unwrap_or(i64::MAX);
    // `2025-01-31T13:04:05.000000Z`, cut to the day or the hour.
    let mut stamp = sluice_limit::headers::format_rfc3339(secs, 0);
    stamp.truncate(match rotation {
        Rotation::Day => 10,
        Rotation::Hour => 13,
    });
    stamp
}

/// The file name of a period's `segment`: `{period}.jsonl` for the first,
/// `{period}.{segment}.jsonl` for those begun when the one before reached
/// `trace.max_file_bytes`.
pub fn segment_name(period: &str, segment: u32) -> String {
    if segment == 0 {
        format!("{period}.jsonl")
    } else {
        format!("{period}.{segment}.jsonl")
    }
}

/// The period and segment a file name of [`segment_name`]'s shape stands
/// for; `None` for any other name (the writer still counts such files
/// against the caps, but never appends to them).
pub fn parse_segment(name: &str) -> Option<(&str, u32)> {
    let stem = name.strip_suffix(".jsonl")?;
    if is_period(stem) {
        return Some((stem, 0));
    }
    let (p, n) = stem.rsplit_once('.')?;
    let plain = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !n.starts_with('0');
    (plain && is_period(p)).then(|| n.parse().ok().map(|n| (p, n)))?
}

/// `YYYY-MM-DD` or `YYYY-MM-DDTHH`.
fn is_period(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let day = b.len() >= 10
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10);
    match b.len() {
        10 => day,
        13 => day && b[10] == b'T' && digits(11..13),
        _ => false,
    }
}

/// Every trace file of `workspace` under `dir`, oldest period and segment
/// first (what a reader concatenates to get the workspace's traces in
/// order). Files of other shapes are left out.
///
/// # Errors
/// Reading the directory failed; a workspace with no directory has no
/// files, which is not an error.
pub fn workspace_files(dir: &Path, workspace: &str) -> std::io::Result<Vec<PathBuf>> {
    let ws = workspace_dir(dir, workspace);
    let entries = match std::fs::read_dir(&ws) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some((p, n)) = parse_segment(name) {
            found.push((p.to_owned(), n, ws.join(name)));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, _, path)| path).collect())
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
    fn workspace_dirs_stay_one_level_below_dir() {
        let dir = Path::new("/var/traces");
        for ws in ["..", "../..", "/abs", "", "a/../../b", "c\0d", "."] {
            let p = workspace_dir(dir, ws).join(segment_name("2025-01-31", 3));
            let rest = p.strip_prefix(dir).unwrap();
            let parts: Vec<_> = rest.components().collect();
            assert_eq!(parts.len(), 2, "{p:?}");
            assert!(
                parts.iter().all(|c| matches!(c, Component::Normal(_))),
                "{p:?}"
            );
        }
    }

    #[test]
    fn periods_are_utc_days_and_hours() {
        assert_eq!(period(0, Rotation::Day), "1970-01-01");
        assert_eq!(period(0, Rotation::Hour), "1970-01-01T00");
        // 2024-02-29T23:59:59.999Z, a leap day.
        let leap = 1_709_251_199_999;
        assert_eq!(period(leap, Rotation::Day), "2024-02-29");
        assert_eq!(period(leap, Rotation::Hour), "2024-02-29T23");
        assert_eq!(period(leap + 1, Rotation::Hour), "2024-03-01T00");
        // 2000-12-31T12:00:00Z and 2100-03-01T00:00:00Z (century rules).
        assert_eq!(period(978_264_000_000, Rotation::Hour), "2000-12-31T12");
        assert_eq!(period(4_107_542_400_000, Rotation::Day), "2100-03-01");
    }

    proptest::proptest! {
        // What lets the writer name a batch's period once.
        #[test]
        fn a_period_is_its_start_divided_by_its_length(ms in 0u64..8_000_000_000_000, hour: bool) {
            let rotate = if hour { Rotation::Hour } else { Rotation::Day };
            let slot = ms / rotate.millis();
            proptest::prop_assert_eq!(period(ms, rotate), period(slot * rotate.millis(), rotate));
            proptest::prop_assert_ne!(period(ms, rotate), period((slot + 1) * rotate.millis(), rotate));
            if slot > 0 {
                proptest::prop_assert_ne!(period(ms, rotate), period(slot * rotate.millis() - 1, rotate));
            }
        }
    }

    #[test]
    fn segment_names_parse_back() {
        for (p, n) in [("2025-01-31", 0), ("2025-01-31T13", 0), ("2025-01-31", 12)] {
            assert_eq!(parse_segment(&segment_name(p, n)), Some((p, n)));
        }
        assert_eq!(segment_name("2025-01-31", 0), "2025-01-31.jsonl");
        assert_eq!(segment_name("2025-01-31", 2), "2025-01-31.2.jsonl");
        for other in [
            "thread-7.jsonl",
            "2025-01-31.jsonl.tmp",
            "2025-01-31.01.jsonl",
            "2025-01-31..jsonl",
            "2025-01-31.x.jsonl",
            "2025-1-31.jsonl",
            "2025-01-31T1.jsonl",
            "2025-01-31.99999999999.jsonl",
        ] {
            assert_eq!(parse_segment(other), None, "{other}");
        }
    }
}
