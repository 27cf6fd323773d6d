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

#[cfg(test)]
mod tests {
    use super::matches;

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
