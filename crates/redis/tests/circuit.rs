//! Circuit marks shared by two replicas on a real redis-server: an open
//! mark is read by the other replica and announced to it; only one
//! replica at a time holds the probe; a probe given back or a closed
//! circuit lets the other probe.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{config, eventually, prefix, redis_url, replica};
use sluice_limit::Rules;
use sluice_redis::{CIRCUIT_TOPIC, CircuitNotice, Mode, NoticeEvent, ProbeClaim};

const NAME: &str = "deployment:openai-a/gpt-4o-mini";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replicas_open_circuit_is_seen_by_the_other_and_one_probes() {
    let Some(url) = redis_url() else { return };
    let p = prefix();
    let a = replica(config(&url, &p, "a", Mode::Exact), Rules::new()).await;
    let b = replica(config(&url, &p, "b", Mode::Exact), Rules::new()).await;
    let heard: Arc<Mutex<Vec<CircuitNotice>>> = Arc::default();
    let sink = Arc::clone(&heard);
    b.on_notice(move |e| {
        if let NoticeEvent::Notice(n) = e
            && n.topic == CIRCUIT_TOPIC
        {
            sink.lock().unwrap().extend(CircuitNotice::parse(&n.body));
        }
    });
    // The bus subscribes in the background: wait until b hears a's
    // notices before counting on them.
    assert!(
        eventually(Duration::from_secs(10), || !b.is_degraded()
            && !a.is_degraded())
        .await,
        "both replicas reach redis"
    );

    let names = vec![NAME.to_owned(), "deployment:other/m".to_owned()];
    assert_eq!(b.open_circuits(&names).await.unwrap(), [None, None]);
    // a opens it for a minute: b reads it, and hears of it.
    let mut sent = false;
    for _ in 0..50 {
        a.open_circuit(NAME, Duration::from_secs(60)).await.unwrap();
        if eventually(Duration::from_millis(200), || {
            !heard.lock().unwrap().is_empty()
        })
        .await
        {
            sent = true;
            break;
        }
    }
    assert!(sent, "b hears the open circuit");
    assert_eq!(
        heard.lock().unwrap()[0],
        CircuitNotice {
            name: NAME.into(),
            open_ms: Some(60_000)
        }
    );
    let open = b.open_circuits(&names).await.unwrap();
    assert!(
        open[0].is_some_and(|left| left > Duration::from_secs(50)),
        "{open:?}"
    );
    assert_eq!(open[1], None);
    // While open, no replica may probe it.
    let ttl = Duration::from_secs(30);
    assert!(matches!(
        b.claim_probe(NAME, ttl).await.unwrap(),
        ProbeClaim::Open(_)
    ));

    // Closed by a: one replica at a time probes it.
    a.close_circuit(NAME).await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), || heard
            .lock()
            .unwrap()
            .iter()
            .any(|n| n.open_ms.is_none()))
        .await,
        "b hears that it closed"
    );
    assert_eq!(b.open_circuits(&names).await.unwrap(), [None, None]);
    assert_eq!(b.claim_probe(NAME, ttl).await.unwrap(), ProbeClaim::Granted);
    assert_eq!(
        b.claim_probe(NAME, ttl).await.unwrap(),
        ProbeClaim::Granted,
        "the holder asking again keeps it"
    );
    match a.claim_probe(NAME, ttl).await.unwrap() {
        ProbeClaim::Probing(left) => assert!(left <= ttl && left > Duration::ZERO),
        other => panic!("a may not probe while b does: {other:?}"),
    }
    // a giving back a probe it does not hold changes nothing.
    a.release_probe(NAME).await.unwrap();
    assert!(matches!(
        a.claim_probe(NAME, ttl).await.unwrap(),
        ProbeClaim::Probing(_)
    ));
    // b's probe proved nothing: given back, a may probe.
    b.release_probe(NAME).await.unwrap();
    assert_eq!(a.claim_probe(NAME, ttl).await.unwrap(), ProbeClaim::Granted);
    // a's probe failed: open again, which also ends a's probe.
    a.open_circuit(NAME, Duration::from_millis(1))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || {
            heard.lock().unwrap().last().and_then(|n| n.open_ms) == Some(1)
        })
        .await
    );
    // Once that short open time passed, b may probe (a's probe is gone).
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(b.claim_probe(NAME, ttl).await.unwrap(), ProbeClaim::Granted);

    // Names are bounded.
    let long = "x".repeat(sluice_redis::MAX_CIRCUIT_NAME + 1);
    assert!(a.open_circuit(&long, ttl).await.is_err());
    assert!(a.claim_probe("", ttl).await.is_err());
    assert!(CircuitNotice::parse("{\"name\": 3}").is_none());
    assert!(CircuitNotice::parse(&format!("{{\"name\": \"{long}\"}}")).is_none());
}
