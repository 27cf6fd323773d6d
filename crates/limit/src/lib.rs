//! Rate limiting.
