//! Claim order: turns across tenants, then across a tenant's groups,
//! priority within a group, pause; jobs not yet due stay out of the way.

use std::collections::HashSet;
use std::time::Duration;

use sluice_jobs::{Error, JobId, JobStore};

use super::{Factory, T0, claim, claim_one, enqueue, job, open};

pub async fn groups_take_turns(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    for (group, n) in [("a", 4), ("b", 2), ("c", 1)] {
        for _ in 0..n {
            enqueue(&store, job("q").group(group)).await;
        }
    }
    let mut order = String::new();
    for _ in 0..7 {
        order += &claim_one(&store, "q", "w").await.0.group;
    }
    assert_eq!(order, "abcabaa", "a busy group cannot starve the others");
}

pub async fn one_claim_spreads_across_groups(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    for group in ["a", "a", "a", "b", "b", "b"] {
        enqueue(&store, job("q").group(group)).await;
    }
    let groups: Vec<String> = claim(&store, "q", "w", 4)
        .await
        .into_iter()
        .map(|j| j.group)
        .collect();
    assert_eq!(groups, ["a", "b", "a", "b"]);
    let next: Vec<String> = claim(&store, "q", "w", 1)
        .await
        .into_iter()
        .map(|j| j.group)
        .collect();
    assert_eq!(next, ["a"], "a was served before b, so it is its turn");
}

pub async fn priority_orders_a_group(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    let low = enqueue(&store, job("q").priority(0)).await;
    let high = enqueue(&store, job("q").priority(10)).await;
    let mid = enqueue(&store, job("q").priority(5)).await;
    let high2 = enqueue(&store, job("q").priority(10)).await;
    let other = enqueue(&store, job("q").group("other").priority(-5)).await;
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(claim_one(&store, "q", "w").await.0.id);
    }
    // Turns first (default, other, default, …), then priority and age within a group.
    assert_eq!(order, [high.id, other.id, high2.id, mid.id, low.id]);
}

/// One claim of a queue with one tenant and one group (the claim's short
/// way, without a ranking) takes its jobs by priority, then age, then id,
/// and leaves those not yet due.
pub async fn one_group_claims_by_priority_then_age(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let secs = |n| T0 + Duration::from_secs(n);
    let low = enqueue(&store, job("q").priority(0)).await;
    // Due later than `high_old`, though stored first.
    let high_new = enqueue(&store, job("q").priority(10).run_at(secs(2))).await;
    let high_old = enqueue(&store, job("q").priority(10).run_at(secs(1))).await;
    let later = enqueue(&store, job("q").priority(99).run_at(secs(9))).await;
    let mid = enqueue(&store, job("q").priority(5)).await;
    let claim_ids = async || -> Vec<JobId> {
        let jobs = claim(&store, "q", "w", 10).await;
        jobs.into_iter().map(|j| j.id).collect()
    };
    clock.advance(Duration::from_secs(3));
    assert_eq!(
        claim_ids().await,
        [high_old.id, high_new.id, mid.id, low.id]
    );
    clock.advance(Duration::from_secs(6));
    assert_eq!(claim_ids().await, [later.id], "due now");
}

pub async fn paused_queue_gives_nothing(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    enqueue(&store, job("q")).await;
    enqueue(&store, job("q")).await;
    enqueue(&store, job("r")).await;
    store.pause("q").await.unwrap();
    store.pause("q").await.unwrap();
    store.pause("z").await.unwrap();
    assert!(claim(&store, "q", "w", 10).await.is_empty());
    assert_eq!(
        claim(&store, "r", "w", 10).await.len(),
        1,
        "other queues go on"
    );
    let counts = store.counts().await.unwrap();
    let paused: Vec<(&str, bool, u64)> = counts
        .iter()
        .map(|q| (q.queue.as_str(), q.paused, q.counts.total()))
        .collect();
    assert_eq!(paused, [("q", true, 2), ("r", false, 1), ("z", true, 0)]);

    store.resume("q").await.unwrap();
    assert_eq!(claim(&store, "q", "w", 10).await.len(), 2);
    assert!(matches!(
        store.pause("").await,
        Err(Error::Invalid { field: "queue", .. })
    ));
}

/// Groups are the tenant's: two tenants that both use the default group
/// take separate turns, rather than one waiting behind the other's backlog.
pub async fn tenants_take_turns_in_a_shared_group_name(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    for _ in 0..4 {
        enqueue(&store, job("q").tenant("acme")).await;
    }
    enqueue(&store, job("q").tenant("globex")).await;
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(claim_one(&store, "q", "w").await.0.tenant);
    }
    assert_eq!(order, ["acme", "globex", "acme", "acme", "acme"]);
}

/// Tenants take turns before groups do: a tenant's many groups share its
/// one turn, so naming more groups does not take more of the queue.
pub async fn many_groups_share_one_tenant_turn(f: &impl Factory) {
    let (store, _clock) = open(f).await;
    for i in 0..6 {
        enqueue(&store, job("q").tenant("flood").group(format!("g{i}"))).await;
    }
    for _ in 0..3 {
        enqueue(&store, job("q").tenant("acme")).await;
    }
    let picked: Vec<(String, String)> = claim(&store, "q", "w", 6)
        .await
        .into_iter()
        .map(|j| (j.tenant, j.group))
        .collect();
    let want = [
        ("flood", "g0"),
        ("acme", "default"),
        ("flood", "g1"),
        ("acme", "default"),
        ("flood", "g2"),
        ("acme", "default"),
    ];
    assert_eq!(picked, want.map(|(t, g)| (t.to_owned(), g.to_owned())));
    let next = claim_one(&store, "q", "w").await.0;
    assert_eq!(
        (next.tenant.as_str(), next.group.as_str()),
        ("flood", "g3"),
        "acme has nothing left; flood's groups go on in turn"
    );
}

/// A tenant's batches of jobs scheduled a year out, each in a group of its
/// own, neither hide nor delay another tenant's due jobs; once their time
/// comes they are claimed like any other.
pub async fn future_jobs_stay_out_of_the_claims_way(f: &impl Factory) {
    let (store, clock) = open(f).await;
    let later = T0 + Duration::from_secs(365 * 86_400);
    for batch in 0..3 {
        let jobs = (0..1_000)
            .map(|i| {
                job("q")
                    .tenant("flood")
                    .group(format!("g{batch}-{i}"))
                    .run_at(later)
            })
            .collect();
        store.enqueue_batch(jobs).await.unwrap();
    }
    let mut due = Vec::new();
    for i in 0..10 {
        due.push(
            enqueue(&store, job("q").tenant("acme").group(format!("a{}", i % 2)))
                .await
                .id,
        );
    }
    let mut got: Vec<JobId> = claim(&store, "q", "w", 20)
        .await
        .into_iter()
        .map(|j| j.id)
        .collect();
    got.sort_unstable();
    assert_eq!(got, due, "exactly the due jobs, every one of them");
    assert!(claim(&store, "q", "w", 20).await.is_empty());

    clock.set(later);
    let woke = claim(&store, "q", "w", 20).await;
    assert_eq!(woke.len(), 20, "their time came");
    assert!(woke.iter().all(|j| j.tenant == "flood"));
    let groups: HashSet<&str> = woke.iter().map(|j| j.group.as_str()).collect();
    assert_eq!(groups.len(), 20, "one job from each of 20 groups");
}

/// A queue's shape: per tenant, how many jobs each of its groups holds.
type Shape = Vec<Vec<usize>>;

/// Per claim, for the first claims: the (tenant, group) of the job that
/// arrives after it.
type Arrivals = Vec<(usize, usize)>;

/// Every claim takes exactly the jobs, in exactly the order, that the
/// ranking of the whole backlog puts first (turns across tenants, then
/// across each tenant's groups, then priority, age and id), whatever the
/// queue's shape: many tenants alike, one heavy tenant among light ones,
/// a tenant of many groups beside a tenant of one, groups of uneven
/// sizes, a random mix; and with jobs arriving between claims, once the
/// turns have told the groups apart: a tenant's many small groups beside
/// a tenant that has one job at a time. The claim reads only a bounded
/// prefix of each group, and of a tenant's groups; this checks that the
/// bound never changes what it takes.
pub async fn claims_match_the_ranking_of_the_whole_backlog(f: &impl Factory) {
    let mut rng = fastrand::Rng::with_seed(40);
    let random: Shape = (0..25)
        .map(|_| {
            let groups = if rng.bool() {
                rng.usize(1..4)
            } else {
                rng.usize(1..40)
            };
            (0..groups).map(|_| rng.usize(1..30)).collect()
        })
        .collect();
    let random_arrivals: Arrivals = (0..40)
        .map(|_| {
            let t = rng.usize(..random.len());
            (t, rng.usize(..random[t].len()))
        })
        .collect();
    // Name, shape, arrivals, and whether claims are all small.
    let shapes: Vec<(&str, Shape, Arrivals, bool)> = vec![
        ("many alike", vec![vec![6]; 300], vec![], false),
        ("alike with groups", vec![vec![12; 8]; 4], vec![], false),
        (
            "one heavy, many light",
            {
                let mut s = vec![vec![400]];
                s.extend(vec![vec![1]; 60]);
                s
            },
            vec![],
            false,
        ),
        (
            "many groups beside one",
            vec![vec![2; 150], vec![500]],
            vec![],
            false,
        ),
        (
            "uneven groups",
            vec![vec![300, 1, 1, 1, 1, 1, 1, 1], vec![3; 20], vec![40]],
            vec![],
            false,
        ),
        (
            "small groups beside a short tenant",
            vec![vec![3; 40], vec![1]],
            vec![(1, 0); 40],
            true,
        ),
        ("random", random, random_arrivals, false),
    ];
    for (name, shape, arrivals, small) in shapes {
        let (store, _clock) = open(f).await;
        let mut new_job = |t: usize, g: usize| {
            let priority = if rng.u8(..4) == 0 { 5 } else { 0 };
            job("q")
                .tenant(format!("t{t:03}"))
                .group(format!("g{g:03}"))
                .priority(priority)
        };
        let mut jobs = Vec::new();
        for (t, groups) in shape.iter().enumerate() {
            for (g, &n) in groups.iter().enumerate() {
                jobs.extend((0..n).map(|_| new_job(t, g)));
            }
        }
        fastrand::Rng::with_seed(jobs.len() as u64).shuffle(&mut jobs);
        let mut backlog = Vec::new();
        for chunk in jobs.chunks(500) {
            let stored = store.enqueue_batch(chunk.to_vec()).await.expect("enqueue");
            backlog.extend(stored.into_iter().map(|e| e.job));
        }
        let mut model = Ranking::default();
        let mut claims = 0;
        while !backlog.is_empty() {
            let n = match small {
                true => [7, 3][claims % 2],
                false => [1, 7, 50, 200, 1 + claims as u32 * 37 % 300][claims % 5],
            };
            let want = model.take(&mut backlog, n as usize);
            let got: Vec<JobId> = claim(&store, "q", "w", n)
                .await
                .iter()
                .map(|j| j.id)
                .collect();
            assert_eq!(got, want, "{name}: claim {claims} of {n}");
            if let Some(&(t, g)) = arrivals.get(claims) {
                backlog.push(enqueue(&store, new_job(t, g)).await);
            }
            claims += 1;
        }
        assert!(claim(&store, "q", "w", 10).await.is_empty(), "{name}");
    }
}

/// The claim order computed over the whole backlog, with the tenants' and
/// groups' turns as the claims serve them.
#[derive(Default)]
struct Ranking {
    tenants: std::collections::HashMap<String, i64>,
    groups: std::collections::HashMap<(String, String), i64>,
}

impl Ranking {
    /// Removes from `backlog` the first `n` jobs of the ranking and
    /// returns their ids in order, serving their tenants and groups.
    fn take(&mut self, backlog: &mut Vec<sluice_jobs::Job>, n: usize) -> Vec<JobId> {
        use std::cmp::Reverse;
        let within = |j: &sluice_jobs::Job| (Reverse(j.priority), j.run_at, j.id);
        backlog.sort_by_key(|j| (j.tenant.clone(), j.group.clone(), within(j)));
        let mut keyed = Vec::new();
        let mut rn = 0;
        for (i, j) in backlog.iter().enumerate() {
            let same =
                i > 0 && backlog[i - 1].tenant == j.tenant && backlog[i - 1].group == j.group;
            rn = if same { rn + 1 } else { 1 };
            let gs = self
                .groups
                .get(&(j.tenant.clone(), j.group.clone()))
                .copied()
                .unwrap_or(0);
            keyed.push((rn, gs, i));
        }
        keyed.sort_by_key(|&(rn, gs, i)| (backlog[i].tenant.clone(), rn, gs, within(&backlog[i])));
        let mut ranked = Vec::new();
        let mut tr = 0;
        for (k, &(_, _, i)) in keyed.iter().enumerate() {
            let same = k > 0 && backlog[keyed[k - 1].2].tenant == backlog[i].tenant;
            tr = if same { tr + 1 } else { 1 };
            let ts = self.tenants.get(&backlog[i].tenant).copied().unwrap_or(0);
            ranked.push((tr, ts, i));
        }
        ranked.sort_by_key(|&(tr, ts, i)| (tr, ts, within(&backlog[i])));
        ranked.truncate(n);
        let taken: Vec<usize> = ranked.iter().map(|&(_, _, i)| i).collect();
        let ids = taken.iter().map(|&i| backlog[i].id).collect();
        // Served in the order taken, after the queue's last turn.
        let mut last_t = self.tenants.values().copied().max().unwrap_or(0);
        let mut last_g = self.groups.values().copied().max().unwrap_or(0);
        let mut seen = HashSet::new();
        for &i in &taken {
            let j = &backlog[i];
            if seen.insert((j.tenant.clone(), None)) {
                last_t += 1;
                self.tenants.insert(j.tenant.clone(), last_t);
            }
            if seen.insert((j.tenant.clone(), Some(j.group.clone()))) {
                last_g += 1;
                self.groups
                    .insert((j.tenant.clone(), j.group.clone()), last_g);
            }
        }
        let gone: HashSet<usize> = taken.into_iter().collect();
        let mut i = 0;
        backlog.retain(|_| {
            i += 1;
            !gone.contains(&(i - 1))
        });
        ids
    }
}
