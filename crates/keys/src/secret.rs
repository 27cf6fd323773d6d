//! The key format, `sk-sluice-<id>_<secret>`: `id` (12 hex digits) is
//! public — it is how the key is listed, rotated and revoked, and how it
//! is found at a check — and `secret` (64 hex digits, 256 random bits) is
//! shown once. Only the SHA-256 of the whole key is stored.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::Error;

/// What every key starts with.
pub const PREFIX: &str = "sk-sluice-";
const ID_BYTES: usize = 6;
const SECRET_BYTES: usize = 32;

/// A new key: its id, the whole key (to show once) and its hash (to store).
#[derive(Clone)]
pub(crate) struct NewSecret {
    pub id: String,
    pub key: String,
    pub hash: String,
}

impl std::fmt::Debug for NewSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSecret").field("id", &self.id).finish()
    }
}

impl NewSecret {
    /// A fresh random key.
    pub(crate) fn generate() -> Result<NewSecret, Error> {
        let mut id = [0u8; ID_BYTES];
        let mut secret = [0u8; SECRET_BYTES];
        getrandom::fill(&mut id).map_err(|e| Error::Random(e.to_string()))?;
        getrandom::fill(&mut secret).map_err(|e| Error::Random(e.to_string()))?;
        let id = hex(&id);
        let key = format!("{PREFIX}{id}_{}", hex(&secret));
        let hash = hash(&key);
        Ok(NewSecret { id, key, hash })
    }
}

/// The id of `key` if it has the form of a sluice key.
pub fn key_id(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let hex_of = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex_of(id, 2 * ID_BYTES) && hex_of(secret, 2 * SECRET_BYTES)).then_some(id)
}

/// The stored form of `key`: its SHA-256 in hex.
pub(crate) fn hash(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

/// Whether `key` hashes to `stored`, compared in constant time.
pub(crate) fn verify(key: &str, stored: &str) -> bool {
    bool::from(hash(key).as_bytes().ct_eq(stored.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_verify() {
        let a = NewSecret::generate().unwrap();
        let b = NewSecret::generate().unwrap();
        assert_ne!(a.key, b.key);
        assert_eq!(key_id(&a.key), Some(a.id.as_str()));
        assert!(verify(&a.key, &a.hash));
        assert!(!verify(&b.key, &a.hash));
        assert_eq!(a.hash.len(), 64);
        assert!(!format!("{a:?}").contains(&a.key));
    }

    #[test]
    fn other_strings_are_not_keys() {
        let k = NewSecret::generate().unwrap().key;
        assert_eq!(key_id("sk-abc"), None);
        assert_eq!(key_id(&k[..k.len() - 1]), None);
        assert_eq!(key_id(&k.replace('_', "-")), None);
        assert_eq!(key_id(&format!("{k}0")), None);
        assert_eq!(key_id(&k.replacen("sk-sluice-", "sk-sluicE-", 1)), None);
    }

    #[test]
    fn hash_is_sha256() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
