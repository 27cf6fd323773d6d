//! Model and API allow-lists: `*` matches any run of characters (slashes
//! included), `?` any one character; everything else matches itself.

/// Whether `text` matches `pattern`.
pub fn matches(pattern: &str, text: &str) -> bool {
    let p = pattern.as_bytes();
    let t = text.as_bytes();
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was, and the text position it now covers up to:
    // on a mismatch the star takes one more character and we go on from
    // there (linear in practice, no recursion).
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == b'?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Whether any of `patterns` matches `text`.
pub fn any(patterns: &[String], text: &str) -> bool {
    patterns.iter().any(|p| matches(p, text))
}

/// Whether a `{server}.{tool}` allow-list entry shows `server` (its
/// resources and prompts): the entry's part before its first `.`
/// matches the server's name; an entry without a `.` is matched as it is
/// (`*` shows every server).
pub fn names_server(pattern: &str, server: &str) -> bool {
    let head = pattern.split_once('.').map_or(pattern, |(s, _)| s);
    matches(head, server)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn an_entry_names_the_servers_its_head_matches() {
        use super::names_server;
        assert!(names_server("sim.SLACK_*", "sim"));
        assert!(names_server("*.SLACK_*", "docs"));
        assert!(names_server("*", "docs"));
        assert!(names_server("s?m.x", "sim"));
        assert!(!names_server("sim.SLACK_*", "simple"));
        assert!(!names_server("github.*", "sim"));
    }

    #[test]
    fn stars_and_marks() {
        assert!(matches("openai/*", "openai/gpt-4o"));
        assert!(matches("openai/gpt-4o*", "openai/gpt-4o-mini"));
        assert!(!matches("openai/gpt-4o", "openai/gpt-4o-mini"));
        assert!(matches("*/claude-*", "anthropic/claude-3-5-haiku"));
        assert!(!matches("*/claude-*", "openai/gpt-4o"));
        assert!(matches("*", ""));
        assert!(matches("gpt-?o", "gpt-4o"));
        assert!(!matches("gpt-?o", "gpt-4-o"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b*c", "axxbyy"));
        assert!(!matches("", "a"));
        assert!(matches("", ""));
    }
}
