//! Fake text and the token counts that go with it: ~4 characters a token
//! in, one word a token out, the same answer for the same prompt.

/// Characters per token when estimating a prompt.
const CHARS_PER_TOKEN: u64 = 4;

const WORDS: &[&str] = &[
    "the",
    "sluice",
    "gate",
    "lets",
    "water",
    "through",
    "at",
    "a",
    "steady",
    "pace",
    "while",
    "agents",
    "wait",
    "their",
    "turn",
    "and",
    "nothing",
    "floods",
    "downstream",
    "so",
    "every",
    "call",
    "arrives",
    "on",
    "time",
    "with",
    "its",
    "tokens",
    "counted",
    "once",
    "more",
    "calmly",
];

/// A prompt's size and a hash of its text, built up part by part.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prompt {
    chars: u64,
    tokens: u64,
    hash: u64,
}

impl Default for Prompt {
    fn default() -> Self {
        Prompt {
            chars: 0,
            tokens: 0,
            hash: 0xcbf2_9ce4_8422_2325,
        }
    }
}

impl Prompt {
    pub(crate) fn add(&mut self, text: &str) {
        self.chars += text.chars().count() as u64;
        self.hash = fnv(self.hash, text.as_bytes());
    }

    /// Tokens given as token ids rather than text.
    pub(crate) fn add_tokens(&mut self, ids: &[u64]) {
        self.tokens += ids.len() as u64;
        for id in ids {
            self.hash = fnv(self.hash, &id.to_le_bytes());
        }
    }

    /// Estimated prompt tokens, at least one.
    pub(crate) fn tokens(&self) -> u64 {
        (self.chars.div_ceil(CHARS_PER_TOKEN) + self.tokens).max(1)
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }
}

/// FNV-1a, continued from `hash`.
pub(crate) fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// `n` tokens of fake completion, one word each, the first without a
/// leading space: concatenated they read as a sentence.
pub(crate) fn tokens(seed: u64, n: u64) -> Vec<String> {
    let start = (seed % WORDS.len() as u64) as usize;
    (0..n as usize)
        .map(|i| {
            let word = WORDS[(start + i) % WORDS.len()];
            if i == 0 {
                word.to_owned()
            } else {
                format!(" {word}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_and_determinism() {
        let mut p = Prompt::default();
        p.add("hello world!");
        assert_eq!(p.tokens(), 3);
        p.add_tokens(&[1, 2]);
        assert_eq!(p.tokens(), 5);
        assert_eq!(Prompt::default().tokens(), 1);
        assert_eq!(tokens(p.hash(), 3), tokens(p.hash(), 3));
        assert_eq!(tokens(0, 3).concat(), "the sluice gate");
    }
}
