//! The IETF fields' parse, form by form.

use super::*;
use std::time::UNIX_EPOCH;

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_714_564_800)
}

fn quota(limit: Option<u64>, remaining: Option<u64>, reset_secs: Option<u64>) -> Option<Quota> {
    Some(Quota {
        limit,
        remaining,
        reset: reset_secs.map(Duration::from_secs),
    })
}

fn finish(policies: &[&str], current: &[&str], fields: Quota) -> (Option<Quota>, Option<Duration>) {
    let mut ietf = Ietf::default();
    for p in policies {
        ietf.add_policies(p);
    }
    for c in current {
        ietf.add_current(c, now());
    }
    ietf.finish(fields)
}

#[test]
fn quoted_separators_stay_inside_names() {
    let names: Vec<_> = fields::list(r#""a,b";q=1, "c\",d";q=2,e"#)
        .unwrap()
        .into_iter()
        .map(|m| m.bare.text().map(str::to_owned))
        .collect();
    let names: Vec<_> = names.iter().map(|n| n.as_deref()).collect();
    assert_eq!(names, [Some("a,b"), Some("c\",d"), Some("e")]);
    let (q, w) = finish(
        &[r#""a,b;c";q=7;w=3"#],
        &[r#""a,b;c";r=1"#],
        Quota::default(),
    );
    assert_eq!(
        (q, w),
        (quota(Some(7), Some(1), None), Some(Duration::from_secs(3)))
    );
}

#[test]
fn structured_form_matches_policy_by_name() {
    let (q, w) = finish(
        &[r#""burst";q=100;w=60, "daily";q=1000;w=86400"#],
        &[r#""burst";r=40;t=20, "daily";r=900;t=3600"#],
        Quota::default(),
    );
    assert_eq!(q, quota(Some(100), Some(40), Some(20)));
    assert_eq!(w, Some(Duration::from_secs(60)));

    // The daily quota is the tighter one now.
    let (q, w) = finish(
        &[r#""burst";q=100;w=60"#, r#""daily";q=1000;w=86400"#],
        &[r#""burst";r=40;t=20"#, r#""daily";r=5;t=3600"#],
        Quota::default(),
    );
    assert_eq!(q, quota(Some(1000), Some(5), Some(3600)));
    assert_eq!(w, Some(Duration::from_secs(86_400)));
}

#[test]
fn draft_07_dictionary_and_integer_policies() {
    let (q, w) = finish(
        &["100;w=60;burst=20, 10;w=1"],
        &["limit=10, remaining=3, reset=1"],
        Quota::default(),
    );
    assert_eq!(q, quota(Some(10), Some(3), Some(1)));
    assert_eq!(
        w,
        Some(Duration::from_secs(1)),
        "the policy whose quota is the limit"
    );

    let (q, w) = finish(&["100;w=60;burst=20, 10;w=1"], &[], Quota::default());
    assert_eq!(
        q,
        quota(Some(100), None, None),
        "a policy alone gives the limit"
    );
    assert_eq!(w, Some(Duration::from_secs(60)));
}

#[test]
fn limit_field_lists_policies() {
    let mut ietf = Ietf::default();
    assert_eq!(ietf.add_limit("10, 10;w=1, 1000;w=3600"), Some(10));
    assert_eq!(ietf.add_limit("100, 100;window=60"), Some(100));
    assert_eq!(ietf.add_limit("lots, 5;w=1"), None);
    assert_eq!(ietf.policies.len(), 4);
}

#[test]
fn separate_fields_fill_the_gaps() {
    let fields = Quota {
        limit: Some(50),
        remaining: Some(9),
        reset: None,
    };
    let (q, _) = finish(&[], &[r#""x";t=4"#], fields);
    assert_eq!(q, quota(Some(50), Some(9), Some(4)));
}

#[test]
fn other_units_and_garbage_are_skipped() {
    let (q, w) = finish(
        &[r#""bytes";q=65536;qu="content-bytes";w=1, "default";q=10;qu="requests";w=5"#],
        &[],
        Quota::default(),
    );
    assert_eq!(
        (q, w),
        (quota(Some(10), None, None), Some(Duration::from_secs(5)))
    );

    let (q, w) = finish(
        &[";;,,=, \"\";w=, q=-1", "\"unterminated;q=3"],
        &["limit=x, remaining=-2, =, ;r=1, \"a\";r=99999999999999999999"],
        Quota::default(),
    );
    assert_eq!((q, w), (None, None));
}
