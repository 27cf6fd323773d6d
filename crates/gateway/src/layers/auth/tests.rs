use super::*;
use crate::keys::tokens::Keys;
use axum::http::HeaderValue;

fn auth(v: &'static str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("authorization", HeaderValue::from_static(v));
    h
}

#[test]
fn one_bearer_parser() {
    assert_eq!(bearer(&HeaderMap::new()), Ok(None));
    assert_eq!(bearer(&auth("Bearer k1")), Ok(Some("k1")));
    assert_eq!(bearer(&auth("bearer   k1 ")), Ok(Some("k1")));
    assert_eq!(bearer(&auth("BEARER k1")), Ok(Some("k1")));
    for bad in ["Basic abc", "Bearer", "Bearer ", "k1", "Bearerk1"] {
        assert!(
            matches!(bearer(&auth(bad)), Err(ApiError::Unauthorized(_))),
            "{bad}"
        );
    }
}

#[test]
fn every_key_is_compared_and_roles_stay_apart() {
    let keys = Keys {
        tenants: vec![
            (b"k-acme".as_slice().into(), Arc::from("acme")),
            (b"k-globex".as_slice().into(), Arc::from("globex")),
        ],
        admin: Some(b"root".as_slice().into()),
        metrics: Some(b"scrape".as_slice().into()),
        dashboard: Some(b"look".as_slice().into()),
    };
    assert_eq!(keys.tenant(b"k-globex").as_deref(), Some("globex"));
    assert_eq!(keys.tenant(b"k-acm"), None);
    assert_eq!(keys.tenant(b"root"), None);
    assert!(keys.is_admin(b"root") && !keys.is_admin(b"scrape"));
    assert!(keys.is_scraper(b"scrape") && keys.is_scraper(b"root"));
    assert!(!keys.is_scraper(b"k-acme"));
    assert!(keys.is_viewer(b"look") && keys.is_viewer(b"root"));
    assert!(!keys.is_viewer(b"scrape") && !keys.is_viewer(b"k-acme"));
    assert!(!keys.is_admin(b"look") && !keys.is_scraper(b"look"));
    assert!(!format!("{keys:?}").contains("k-acme"));
}
