//! The parser against real header sets of each upstream.

use super::*;
use proptest::prelude::*;
use std::time::UNIX_EPOCH;

/// 2024-05-01T12:00:00Z.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_714_564_800)
}

fn parse(headers: &[(&str, &str)]) -> RateLimitHeaders {
    RateLimitHeaders::parse(headers.iter().copied(), now())
}

fn quota(limit: u64, remaining: u64, reset: Duration) -> Option<Quota> {
    Some(Quota {
        limit: Some(limit),
        remaining: Some(remaining),
        reset: Some(reset),
    })
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn openai_response() {
    let h = parse(&[
        ("date", "Wed, 01 May 2024 12:00:00 GMT"),
        ("content-type", "application/json"),
        ("openai-processing-ms", "512"),
        ("x-ratelimit-limit-requests", "5000"),
        ("x-ratelimit-limit-tokens", "160000"),
        ("x-ratelimit-limit-tokens_usage_based", "160000"),
        ("x-ratelimit-remaining-requests", "4999"),
        ("x-ratelimit-remaining-tokens", "159976"),
        ("x-ratelimit-reset-requests", "12ms"),
        ("x-ratelimit-reset-tokens", "6m0s"),
        ("x-request-id", "req_0123456789abcdef"),
    ]);
    assert_eq!(h.requests, quota(5_000, 4_999, ms(12)));
    assert_eq!(h.tokens, quota(160_000, 159_976, secs(360)));
    assert_eq!(
        (h.input_tokens, h.output_tokens, h.retry_after),
        (None, None, None)
    );
    assert_eq!(h.policy_window, None);
}

#[test]
fn openai_429() {
    let h = parse(&[
        ("x-ratelimit-limit-requests", "60"),
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "1h2m3.5s"),
        ("x-ratelimit-limit-tokens", "150000"),
        ("x-ratelimit-remaining-tokens", "0"),
        ("x-ratelimit-reset-tokens", "7.66s"),
        ("retry-after", "8"),
        ("retry-after-ms", "7660"),
    ]);
    assert_eq!(h.requests, quota(60, 0, ms(3_723_500)));
    assert_eq!(h.tokens, quota(150_000, 0, ms(7_660)));
    assert_eq!(h.retry_after, Some(ms(7_660)), "milliseconds win");
    assert_eq!(parse(&[("retry-after", "8")]).retry_after, Some(secs(8)));
}

#[test]
fn anthropic_response_with_combined_tokens() {
    let h = parse(&[
        ("anthropic-ratelimit-input-tokens-limit", "80000"),
        ("anthropic-ratelimit-input-tokens-remaining", "80000"),
        (
            "anthropic-ratelimit-input-tokens-reset",
            "2024-05-01T11:59:59Z",
        ),
        ("anthropic-ratelimit-output-tokens-limit", "16000"),
        ("anthropic-ratelimit-output-tokens-remaining", "15000"),
        (
            "anthropic-ratelimit-output-tokens-reset",
            "2024-05-01T12:00:04Z",
        ),
        ("anthropic-ratelimit-requests-limit", "1000"),
        ("anthropic-ratelimit-requests-remaining", "999"),
        (
            "anthropic-ratelimit-requests-reset",
            "2024-05-01T12:00:00.060Z",
        ),
        ("anthropic-ratelimit-tokens-limit", "96000"),
        ("anthropic-ratelimit-tokens-remaining", "95000"),
        (
            "anthropic-ratelimit-tokens-reset",
            "2024-05-01T14:00:30+02:00",
        ),
        ("request-id", "req_011CSLsW7mFqvHHnzrKdKjAE"),
        (
            "anthropic-organization-id",
            "36562039-1ae4-48e6-ae28-1e517e3d2d12",
        ),
    ]);
    assert_eq!(h.requests, quota(1_000, 999, ms(60)));
    assert_eq!(
        h.tokens,
        quota(96_000, 95_000, secs(30)),
        "the combined quota"
    );
    assert_eq!(
        h.input_tokens,
        quota(80_000, 80_000, Duration::ZERO),
        "reset passed"
    );
    assert_eq!(h.output_tokens, quota(16_000, 15_000, secs(4)));
}

#[test]
fn anthropic_split_tokens_only_take_the_tighter() {
    let input = [
        ("anthropic-ratelimit-input-tokens-limit", "40000"),
        ("anthropic-ratelimit-input-tokens-remaining", "1200"),
        (
            "anthropic-ratelimit-input-tokens-reset",
            "2024-05-01T12:00:45Z",
        ),
    ];
    let output = [
        ("anthropic-ratelimit-output-tokens-limit", "8000"),
        ("anthropic-ratelimit-output-tokens-remaining", "7000"),
        (
            "anthropic-ratelimit-output-tokens-reset",
            "2024-05-01T12:00:05Z",
        ),
    ];
    let both: Vec<_> = input.iter().chain(&output).copied().collect();
    assert_eq!(parse(&both).tokens, quota(40_000, 1_200, secs(45)));
    let both: Vec<_> = output.iter().chain(&input).copied().collect();
    assert_eq!(
        parse(&both).tokens,
        quota(40_000, 1_200, secs(45)),
        "order does not matter"
    );
    assert_eq!(
        parse(&output).tokens,
        quota(8_000, 7_000, secs(5)),
        "one side alone"
    );

    let retry = [
        ("anthropic-ratelimit-output-tokens-remaining", "0"),
        ("anthropic-ratelimit-input-tokens-remaining", "garbage"),
        ("retry-after", "5"),
    ];
    let h = parse(&retry);
    assert_eq!(h.tokens.and_then(|q| q.remaining), Some(0));
    assert_eq!(h.input_tokens, None);
    assert_eq!(h.retry_after, Some(secs(5)));
}

#[test]
fn names_are_case_insensitive() {
    let h = parse(&[
        ("X-RateLimit-Remaining-Requests", "7"),
        ("X-RATELIMIT-RESET-TOKENS", "20ms"),
        ("Anthropic-RateLimit-Output-Tokens-Limit", "8000"),
        ("Retry-After", "3"),
        ("RateLimit-Policy", "10;w=1"),
        (" retry-after-ms ", "2500"),
    ]);
    assert_eq!(h.requests.and_then(|q| q.remaining), Some(7));
    assert_eq!(h.tokens.and_then(|q| q.reset), Some(ms(20)));
    assert_eq!(h.output_tokens.and_then(|q| q.limit), Some(8_000));
    assert_eq!(h.retry_after, Some(ms(2_500)));
    assert_eq!(h.policy_window, Some(secs(1)));
}

#[test]
fn ietf_structured_form() {
    let h = parse(&[
        (
            "RateLimit-Policy",
            r#""burst";q=100;w=60, "daily";q=1000;w=86400"#,
        ),
        ("RateLimit", r#""burst";r=50;t=30, "daily";r=600;t=3600"#),
    ]);
    assert_eq!(h.requests, quota(100, 50, secs(30)));
    assert_eq!(h.policy_window, Some(secs(60)));

    let h = parse(&[
        ("RateLimit-Policy", r#""default";q=100;w=10"#),
        ("RateLimit", r#""default";r=0;t=7"#),
    ]);
    assert_eq!(h.requests, quota(100, 0, secs(7)));
    assert_eq!(h.policy_window, Some(secs(10)));
}

#[test]
fn ietf_draft_07_form() {
    let h = parse(&[
        ("RateLimit", "limit=10, remaining=5, reset=2"),
        ("RateLimit-Policy", "100;w=60;burst=20, 10;w=1"),
    ]);
    assert_eq!(h.requests, quota(10, 5, secs(2)));
    assert_eq!(h.policy_window, Some(secs(1)));
}

#[test]
fn ietf_separate_fields() {
    let h = parse(&[
        ("RateLimit-Limit", "100, 100;w=60"),
        ("RateLimit-Remaining", "42"),
        ("RateLimit-Reset", "17"),
    ]);
    assert_eq!(h.requests, quota(100, 42, secs(17)));
    assert_eq!(h.policy_window, Some(secs(60)));
}

#[test]
fn common_x_ratelimit_seconds_or_unix_time() {
    // GitHub: a Unix timestamp.
    let h = parse(&[
        ("x-ratelimit-limit", "5000"),
        ("x-ratelimit-remaining", "4987"),
        ("x-ratelimit-reset", "1714566600"),
        ("x-ratelimit-used", "13"),
        ("x-ratelimit-resource", "core"),
    ]);
    assert_eq!(h.requests, quota(5_000, 4_987, secs(1_800)));

    // Seconds from now, and a timestamp already passed.
    let h = parse(&[("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "45")]);
    assert_eq!(h.requests.and_then(|q| q.reset), Some(secs(45)));
    let h = parse(&[("X-RateLimit-Reset", "1714564000")]);
    assert_eq!(h.requests.and_then(|q| q.reset), Some(Duration::ZERO));
}

#[test]
fn reset_after_wins_over_unix_time() {
    // Discord: both, with fractions.
    let h = parse(&[
        ("X-RateLimit-Limit", "5"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset", "1714564801.500"),
        ("X-RateLimit-Reset-After", "1.250"),
    ]);
    assert_eq!(h.requests, quota(5, 0, ms(1_250)));
    let h = parse(&[("X-RateLimit-Reset", "1714564801.500")]);
    assert_eq!(h.requests.and_then(|q| q.reset), Some(ms(1_500)));
}

#[test]
fn specific_headers_win_over_generic() {
    let h = parse(&[
        ("x-ratelimit-limit", "1"),
        ("x-ratelimit-remaining", "1"),
        ("ratelimit", "limit=2, remaining=2, reset=2"),
        ("x-ratelimit-remaining-requests", "3"),
        ("x-ratelimit-reset-requests", "3s"),
    ]);
    assert_eq!(
        h.requests,
        Some(Quota {
            limit: None,
            remaining: Some(3),
            reset: Some(secs(3))
        })
    );

    let h = parse(&[
        ("x-ratelimit-remaining", "1"),
        ("ratelimit", "limit=2, remaining=2, reset=2"),
    ]);
    assert_eq!(h.requests, quota(2, 2, secs(2)), "IETF before X-RateLimit");
}

#[test]
fn repeated_headers_keep_the_first_readable_value() {
    let h = parse(&[
        ("x-ratelimit-remaining-requests", "n/a"),
        ("x-ratelimit-remaining-requests", "9"),
        ("x-ratelimit-remaining-requests", "8"),
    ]);
    assert_eq!(h.requests.and_then(|q| q.remaining), Some(9));
}

#[test]
fn garbage_values_are_ignored() {
    let h = parse(&[
        ("x-ratelimit-limit-requests", "lots"),
        ("x-ratelimit-remaining-requests", "-1"),
        ("x-ratelimit-reset-requests", "soon"),
        ("x-ratelimit-limit-tokens", "99999999999999999999999"),
        ("x-ratelimit-remaining-tokens", "+5"),
        ("x-ratelimit-reset-tokens", "6m0s"),
        ("anthropic-ratelimit-requests-reset", "2024-02-30T00:00:00Z"),
        ("retry-after", "tomorrow"),
        ("retry-after-ms", "1e3"),
        ("ratelimit", "\"unterminated;r=1"),
        ("ratelimit-policy", ";;;,,,w=w"),
        ("x-ratelimit-reset-after", "∞"),
    ]);
    assert_eq!(h.requests, None);
    assert_eq!(
        h.tokens,
        Some(Quota {
            limit: None,
            remaining: None,
            reset: Some(secs(360))
        })
    );
    assert_eq!((h.retry_after, h.policy_window), (None, None));
}

#[test]
fn nothing_to_read_is_empty() {
    assert!(parse(&[]).is_empty());
    assert!(
        parse(&[
            ("content-type", "text/plain"),
            ("x-ratelimit-remaining", "")
        ])
        .is_empty()
    );
    assert!(!parse(&[("retry-after", "0")]).is_empty());
}

proptest! {
    #[test]
    fn parse_never_panics(
        headers in prop::collection::vec(
            (
                prop_oneof![
                    prop::sample::select(
                        GROUPS.iter().flat_map(|(_, names)| names.iter().map(|(n, _)| n.to_string())).collect::<Vec<_>>()
                    ),
                    "\\PC{0,30}",
                ],
                prop_oneof![
                    "\\PC*",
                    "[-+0-9.,;=:\" a-zA-Zµ]{0,40}",
                    "[0-9]{1,25}",
                ],
            ),
            0..12,
        ),
        now_secs in 0u64..=u64::from(u32::MAX) * 4,
    ) {
        let now = UNIX_EPOCH + Duration::from_secs(now_secs);
        let pairs = headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        let _ = RateLimitHeaders::parse(pairs, now);
    }

    #[test]
    fn parse_reset_never_panics(value in "\\PC*") {
        let _ = parse_reset(&value, now());
        let _ = parse_retry_after(&value, now());
    }
}

#[test]
fn every_name_is_found_in_its_group_and_others_are_skipped() {
    for (prefix, names) in GROUPS {
        for &(name, _) in *names {
            assert!(name.starts_with(prefix), "{name} is not under {prefix}");
            assert!(may_read(name) && slot(name).is_some(), "{name}");
            let shouted = format!(" {} ", name.to_ascii_uppercase());
            assert!(may_read(&shouted) && slot(&shouted).is_some(), "{shouted}");
        }
    }
    for other in [
        "content-type",
        "date",
        "x-request-id",
        "x-ratelimi",
        "",
        "r",
    ] {
        assert!(!may_read(other), "{other}");
    }
    // A name with a group's prefix that is none of its names.
    assert!(may_read("x-ratelimit-bogus") && slot("x-ratelimit-bogus").is_none());
}

proptest! {
    #[test]
    fn a_name_skipped_by_its_prefix_is_never_read(name in "[ a-zA-Z-]{0,24}") {
        if !may_read(&name) {
            prop_assert!(slot(&name).is_none());
        }
    }
}
