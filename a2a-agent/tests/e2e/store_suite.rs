//! One suite of store tests, run against the in-memory store, a real single Redis and a real 3-node Redis Cluster
//! (`memory::*`, `redis::*`, `cluster::*`). For the shared stores, `a` and `b` are two store instances on the same
//! Redis, as two processes have them; for the memory store both are the same store.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use a2a_core::did::Did;
use a2a_core::execution_id::ExecutionId;
use a2a_core::wire::ExecutionStatus;
use a2a_server::registry::{MemoryRegistry, RedisRegistry, Registry, RegistryEntry};
use a2a_server::store::memory::MemoryLimits;
use a2a_server::store::redis::{AgentScope, RedisConfig};
use a2a_server::store::{
    Created, ExecutionRecord, Executions, IdempotencyClaim, MemoryStore, NegotiationRecord, RedisStore, Store,
    Transition, TransitionOutcome, WorkItem, WorkQueue, now_ms,
};
use serde_json::json;

use crate::redis_support::{shared_cluster, shared_server, unique_prefix};

#[derive(Clone, Copy, PartialEq)]
pub enum Backend {
    Memory,
    Redis,
    Cluster,
}

pub struct Stores {
    pub a: Arc<dyn Store>,
    pub b: Arc<dyn Store>,
    pub registry_a: Arc<dyn Registry>,
    pub registry_b: Arc<dyn Registry>,
}

pub const SENDER: &str = "did:web:caller.example.com";
const AGENT: &str = "did:web:agent.example.com";

pub fn redis_config(backend: Backend, prefix: &str, visibility: Duration) -> RedisConfig {
    let url = match backend {
        Backend::Cluster => shared_cluster().urls(),
        _ => shared_server().url(),
    };
    RedisConfig::new(url)
        .with_cluster(backend == Backend::Cluster)
        .with_key_prefix(prefix)
        .with_visibility_timeout(visibility)
}

pub fn scope(max_received: usize) -> AgentScope {
    AgentScope { did: AGENT.into(), retention: Duration::from_secs(3600), max_received }
}

pub fn stores(backend: Backend, name: &str, visibility: Duration, max_received: usize) -> Stores {
    match backend {
        Backend::Memory => {
            let mut l = MemoryLimits::default();
            l.visibility_timeout = visibility;
            l.max_received = max_received;
            let s: Arc<dyn Store> = Arc::new(MemoryStore::new(l));
            let r: Arc<dyn Registry> = Arc::new(MemoryRegistry::default());
            Stores { a: s.clone(), b: s, registry_a: r.clone(), registry_b: r }
        }
        _ => {
            let prefix = unique_prefix(name);
            let cfg = redis_config(backend, &prefix, visibility);
            let a = RedisStore::connect(cfg.clone(), scope(max_received)).expect("connect a");
            let b = RedisStore::connect(cfg, scope(max_received)).expect("connect b");
            Stores {
                registry_a: Arc::new(RedisRegistry::new(a.clone(), vec![])),
                registry_b: Arc::new(RedisRegistry::new(b.clone(), vec![])),
                a,
                b,
            }
        }
    }
}

/// A fresh execution id that fits the claim (as EXECUTE draws them).
pub fn new_id(store: &dyn Store, claim: Option<&IdempotencyClaim>) -> String {
    let did = Did::parse(SENDER).expect("did");
    loop {
        let id = ExecutionId::generate(&did).expect("id").to_string();
        if store.id_fits(&id, claim) {
            return id;
        }
    }
}

pub fn record(id: &str, capability: &str, timeout_ms: u64) -> ExecutionRecord {
    let now = now_ms();
    ExecutionRecord {
        id: id.into(),
        negotiation_id: "n_test".into(),
        sender: SENDER.into(),
        capability: capability.into(),
        payload: json!({"n": 1, "big": 12345678901234567890u64, "f": 0.1}),
        status: ExecutionStatus::Received,
        timeout_ms,
        created_at_ms: now,
        updated_at_ms: now,
        confirm_by_ms: now + 60_000,
        deadline_ms: None,
        confirmed: false,
        attempts: 0,
        result: None,
        error: None,
        retain_until_ms: now + 3_600_000,
        idempotency_key: None,
        sender_verified: false,
        traceparent: None,
        rev: 0,
    }
}

fn accept() -> Transition {
    Transition::Accept { now_ms: now_ms(), sender_verified: true, traceparent: None }
}

fn finish(status: ExecutionStatus) -> Transition {
    let error = (status != ExecutionStatus::Succeeded).then(|| a2a_core::error::ErrorObject {
        code: a2a_core::error::ErrorCode::CANCELED,
        message: "test".into(),
        details: None,
    });
    Transition::Finish {
        now_ms: now_ms(),
        status,
        result: (status == ExecutionStatus::Succeeded).then(|| json!({"ok": true})),
        error,
    }
}

async fn created(s: &dyn Store, capability: &str) -> ExecutionRecord {
    let id = new_id(s, None);
    let rec = record(&id, capability, 30_000);
    assert_eq!(s.create_execution(rec.clone(), None).await.expect("create"), Created::New);
    s.get_execution(&id).await.expect("get").expect("stored")
}

/// Claims until `want` items came or `patience` passed.
async fn claim_all(s: &dyn Store, want: usize, patience: Duration) -> Vec<WorkItem> {
    let until = tokio::time::Instant::now() + patience;
    let mut out = Vec::new();
    while out.len() < want && tokio::time::Instant::now() < until {
        for p in 0..s.queue_partitions() {
            out.extend(s.claim_work(p, want - out.len().min(want), Duration::from_millis(50)).await.expect("claim"));
        }
    }
    out
}

pub async fn transitions_follow_the_state_machine_and_never_go_backwards(b: Backend) {
    let st = stores(b, "sm", Duration::from_secs(30), 1000);
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    let rec = created(&*st.a, "submit_report").await;
    assert_eq!(rec.status, ExecutionStatus::Received);
    // Start before Accept is refused (ST-1).
    let r = st.b.transition(&rec.id, Transition::Start { now_ms: now_ms(), rerun: false }, None).await.expect("t");
    assert!(matches!(r, TransitionOutcome::Refused(_)), "{r:?}");
    let TransitionOutcome::Applied(acc) = st.b.transition(&rec.id, accept(), None).await.expect("t") else {
        panic!("accept refused")
    };
    assert_eq!(acc.status, ExecutionStatus::Accepted);
    assert!(acc.deadline_ms.is_some() && acc.confirmed && acc.sender_verified);
    // A stale `seen` (received) does not make a second Accept apply.
    let again = st.a.transition(&rec.id, accept(), Some(&rec)).await.expect("t");
    assert!(matches!(again, TransitionOutcome::Refused(ref r) if r.status == ExecutionStatus::Accepted), "{again:?}");
    let TransitionOutcome::Applied(run) =
        st.a.transition(&rec.id, Transition::Start { now_ms: now_ms(), rerun: false }, Some(&acc)).await.expect("t")
    else {
        panic!("start refused")
    };
    assert_eq!((run.status, run.attempts), (ExecutionStatus::Running, 1));
    // A re-run (take-over) is running -> running with one more attempt.
    let TransitionOutcome::Applied(rerun) =
        st.b.transition(&rec.id, Transition::Start { now_ms: now_ms(), rerun: true }, None).await.expect("t")
    else {
        panic!("rerun refused")
    };
    assert_eq!((rerun.status, rerun.attempts), (ExecutionStatus::Running, 2));
    let done = st.a.transition(&rec.id, finish(ExecutionStatus::Succeeded), Some(&run)).await.expect("t");
    assert!(matches!(done, TransitionOutcome::Applied(ref r) if r.status == ExecutionStatus::Succeeded), "{done:?}");
    for t in [accept(), Transition::Start { now_ms: now_ms(), rerun: true }, finish(ExecutionStatus::Failed)] {
        let r = st.b.transition(&rec.id, t, None).await.expect("t");
        assert!(matches!(r, TransitionOutcome::Refused(ref r) if r.status == ExecutionStatus::Succeeded), "{r:?}");
    }
    let stored = st.b.get_execution(&rec.id).await.expect("get").expect("stored");
    assert_eq!(stored.result, Some(json!({"ok": true})));
    assert_eq!(stored.payload["big"], json!(12345678901234567890u64), "payload numbers survive storage exactly");
    assert_eq!(st.a.transition("did:web:x_1_y", accept(), None).await.expect("t"), TransitionOutcome::NotFound);
}

pub async fn first_terminal_write_wins_under_concurrency(b: Backend) {
    let st = stores(b, "race", Duration::from_secs(30), 1000);
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    for _ in 0..5 {
        let rec = created(&*st.a, "submit_report").await;
        st.a.transition(&rec.id, accept(), None).await.expect("accept");
        let statuses =
            [ExecutionStatus::Succeeded, ExecutionStatus::Failed, ExecutionStatus::TimedOut, ExecutionStatus::Canceled];
        let mut tasks = Vec::new();
        for i in 0..32 {
            let s = if i % 2 == 0 { st.a.clone() } else { st.b.clone() };
            let id = rec.id.clone();
            let status = statuses[i % 4];
            tasks.push(tokio::spawn(async move {
                if status == ExecutionStatus::Succeeded || status == ExecutionStatus::Failed {
                    let _ = s.transition(&id, Transition::Start { now_ms: now_ms(), rerun: true }, None).await;
                }
                (status, s.transition(&id, finish(status), None).await.expect("finish"))
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            let (status, outcome) = t.await.expect("task");
            if let TransitionOutcome::Applied(r) = outcome {
                assert_eq!(r.status, status);
                winners.push(status);
            }
        }
        assert_eq!(winners.len(), 1, "exactly one terminal write applies (ST-2): {winners:?}");
        let stored = st.b.get_execution(&rec.id).await.expect("get").expect("stored");
        assert_eq!(stored.status, winners[0], "the first terminal state is final");
    }
}

pub async fn concurrent_confirms_accept_once_and_queue_once(b: Backend) {
    let st = stores(b, "confirm", Duration::from_secs(30), 1000);
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    st.b.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    let rec = created(&*st.a, "submit_report").await;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = if i % 2 == 0 { st.a.clone() } else { st.b.clone() };
        let (id, seen) = (rec.id.clone(), rec.clone());
        tasks.push(tokio::spawn(async move { s.transition(&id, accept(), Some(&seen)).await.expect("accept") }));
    }
    let mut applied = 0;
    for t in tasks {
        if matches!(t.await.expect("task"), TransitionOutcome::Applied(_)) {
            applied += 1;
        }
    }
    assert_eq!(applied, 1, "CONF-2: concurrent first CONFIRMs accept once");
    let items = claim_all(&*st.b, 2, Duration::from_millis(600)).await;
    assert_eq!(items.len(), 1, "the work is queued once: {items:?}");
    assert_eq!(items[0].execution_id, rec.id);
    assert_eq!(items[0].deliveries, 1);
    assert_eq!(items[0].snapshot.as_ref().map(|s| s.status), Some(ExecutionStatus::Accepted));
}

pub async fn a_worker_that_ran_before_recording_its_start_records_both_in_one_step(b: Backend) {
    let st = stores(b, "ran", Duration::from_secs(30), 1000);
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    st.b.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    let ran = |status: ExecutionStatus| Transition::Ran {
        now_ms: now_ms(),
        rerun: false,
        status,
        result: (status == ExecutionStatus::Succeeded).then(|| json!({"ok": true})),
        error: None,
    };
    let rec = created(&*st.a, "submit_report").await;
    // Not from `received` (ST-1: it was never accepted).
    let r = st.b.transition(&rec.id, ran(ExecutionStatus::Succeeded), Some(&rec)).await.expect("t");
    assert!(matches!(r, TransitionOutcome::Refused(ref r) if r.status == ExecutionStatus::Received), "{r:?}");
    st.a.transition(&rec.id, accept(), None).await.expect("accept");
    let items = claim_all(&*st.b, 1, Duration::from_secs(5)).await;
    assert_eq!(items.len(), 1);
    let snap = items[0].snapshot.clone().expect("snapshot");
    let done = st.b.complete_work(&items[0], Some(ran(ExecutionStatus::Succeeded)), Some(&snap)).await.expect("c");
    let Some(TransitionOutcome::Applied(done)) = done else { panic!("ran refused: {done:?}") };
    assert_eq!((done.status, done.attempts), (ExecutionStatus::Succeeded, 1), "it passed through running once");
    assert_eq!(done.rev, snap.rev + 2, "two transitions, one write");
    let stored = st.a.get_execution(&rec.id).await.expect("get").expect("stored");
    assert_eq!(
        (stored.status, stored.attempts, stored.result),
        (ExecutionStatus::Succeeded, 1, Some(json!({"ok": true})))
    );
    // The first terminal state stays (ST-2); the work is released.
    let again = st.a.transition(&rec.id, ran(ExecutionStatus::Failed), Some(&snap)).await.expect("t");
    assert!(matches!(again, TransitionOutcome::Refused(ref r) if r.status == ExecutionStatus::Succeeded), "{again:?}");
    assert!(claim_all(&*st.a, 1, Duration::from_millis(300)).await.is_empty(), "completed work is gone");
}

pub async fn confirm_with_a_stale_record_decides_on_the_stored_one(b: Backend) {
    let st = stores(b, "stale", Duration::from_secs(30), 1000);
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    let id = new_id(&*st.a, None);
    assert_eq!(st.a.create_execution(record(&id, "submit_report", 30_000), None).await.expect("c"), Created::New);
    let mine = st.a.get_execution_for_update(&id).await.expect("get").expect("stored");
    assert_eq!((mine.status, mine.sender.as_str()), (ExecutionStatus::Received, SENDER));
    // Canceled in another process: the record `a` holds is now stale.
    st.b.transition(&id, finish(ExecutionStatus::Canceled), None).await.expect("cancel");
    let hint = st.a.get_execution_for_update(&id).await.expect("get").expect("stored");
    let (r, claimed) = st.a.accept_and_claim(&id, accept(), Some(&hint)).await.expect("accept");
    assert!(matches!(r, TransitionOutcome::Refused(ref r) if r.status == ExecutionStatus::Canceled), "{r:?}");
    assert!(claimed.is_none(), "nothing is queued or claimed for a refused accept");
    assert!(claim_all(&*st.b, 1, Duration::from_millis(300)).await.is_empty(), "nothing was queued");
}

pub async fn confirm_claims_queued_work_for_its_own_process_and_a_lost_claim_is_taken_over(b: Backend) {
    // Long enough that `b`'s first claims below never see `a`'s claim as lapsed on a loaded CI machine.
    let vis = Duration::from_millis(1_500);
    let st = stores(b, "confclaim", vis, 1000);
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    st.b.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    // Two executions in one shard (ids drawn to fit one idempotency claim's shard): one queue.
    let claim = IdempotencyClaim { sender: SENDER.into(), key: "k".into(), fingerprint: "f".into() };
    let older = new_id(&*st.a, Some(&claim));
    let newer = new_id(&*st.a, Some(&claim));
    for id in [&older, &newer] {
        assert_eq!(st.a.create_execution(record(id, "submit_report", 30_000), None).await.expect("c"), Created::New);
    }
    let TransitionOutcome::Applied(_) = st.a.transition(&older, accept(), None).await.expect("accept") else {
        panic!("accept refused")
    };
    let seen = st.a.get_execution_for_update(&newer).await.expect("get").expect("stored");
    let (r, claimed) = st.a.accept_and_claim(&newer, accept(), Some(&seen)).await.expect("accept");
    let TransitionOutcome::Applied(acc) = r else { panic!("accept refused: {r:?}") };
    assert_eq!(acc.status, ExecutionStatus::Accepted);
    if b != Backend::Memory {
        // The oldest unclaimed work of the queue is claimed for `a`: the work queued first.
        let item = claimed.expect("claimed");
        assert_eq!((item.execution_id.as_str(), item.deliveries), (older.as_str(), 1));
        assert_eq!(item.snapshot.as_ref().map(|s| s.status), Some(ExecutionStatus::Accepted));
        // `b` gets only the rest, until `a`'s claim lapses (its process died): then `b` takes it over.
        let first: Vec<String> =
            claim_all(&*st.b, 2, Duration::from_millis(300)).await.into_iter().map(|i| i.execution_id).collect();
        assert_eq!(first, vec![newer.clone()]);
        let until = tokio::time::Instant::now() + Duration::from_secs(20);
        let mut taken = Vec::new();
        while taken.is_empty() && tokio::time::Instant::now() < until {
            for p in 0..st.b.queue_partitions() {
                taken.extend(st.b.claim_work(p, 10, Duration::from_millis(100)).await.expect("claim"));
            }
        }
        let taken: Vec<_> = taken.into_iter().filter(|i| i.execution_id == older).collect();
        assert_eq!(taken.len(), 1, "the lost claim is taken over");
        assert!(taken[0].deliveries >= 2, "{:?}", taken[0]);
        return;
    }
    assert!(claimed.is_none(), "the memory store's workers take the work from its queue");
    let mut got: Vec<String> =
        claim_all(&*st.b, 2, Duration::from_secs(5)).await.into_iter().map(|i| i.execution_id).collect();
    got.sort();
    let mut all = vec![older, newer];
    all.sort();
    assert_eq!(got, all);
}

pub async fn queued_work_is_claimed_once_across_processes_and_released_when_done(b: Backend) {
    let st = stores(b, "queue", Duration::from_secs(30), 1000);
    let caps = vec!["submit_report".to_owned(), "run_slow_task".to_owned()];
    st.a.prepare_queue(&caps).await.expect("prepare");
    st.b.prepare_queue(&caps).await.expect("prepare");
    let mut ids = BTreeSet::new();
    for i in 0..40 {
        let rec = created(&*st.a, &caps[i % 2]).await;
        st.a.transition(&rec.id, accept(), Some(&rec)).await.expect("accept");
        ids.insert(rec.id);
    }
    let (x, y) =
        tokio::join!(claim_all(&*st.a, 20, Duration::from_secs(5)), claim_all(&*st.b, 20, Duration::from_secs(5)));
    let mut seen = BTreeSet::new();
    for item in x.iter().chain(y.iter()) {
        assert!(seen.insert(item.execution_id.clone()), "claimed twice: {}", item.execution_id);
        let snap = item.snapshot.as_ref().expect("snapshot");
        assert_eq!(snap.capability, item.capability);
    }
    let rest = claim_all(&*st.a, 40, Duration::from_millis(300)).await;
    for item in &rest {
        assert!(seen.insert(item.execution_id.clone()), "claimed twice: {}", item.execution_id);
    }
    assert_eq!(seen, ids, "every queued execution is claimed exactly once");
    for item in x.iter().chain(y.iter()).chain(rest.iter()) {
        let s = if item.deliveries % 2 == 0 { &st.a } else { &st.b };
        let r = s.transition(&item.execution_id, Transition::Start { now_ms: now_ms(), rerun: false }, None).await;
        let TransitionOutcome::Applied(run) = r.expect("start") else { panic!("start refused") };
        let done = s.complete_work(item, Some(finish(ExecutionStatus::Succeeded)), Some(&run)).await.expect("complete");
        assert!(matches!(done, Some(TransitionOutcome::Applied(_))), "{done:?}");
    }
    assert!(claim_all(&*st.b, 1, Duration::from_millis(300)).await.is_empty(), "completed work is gone");
}

pub async fn work_of_a_lost_worker_is_taken_over_after_the_visibility_timeout(b: Backend) {
    // The visibility timeout is 15 touches long, so that a loaded machine (the whole suite runs in parallel on two
    // vCPUs) stalling the toucher for a moment does not let the touched work go idle.
    let vis = Duration::from_millis(1500);
    let st = stores(b, "takeover", vis, 1000);
    let caps = vec!["submit_report".to_owned()];
    st.a.prepare_queue(&caps).await.expect("prepare");
    st.b.prepare_queue(&caps).await.expect("prepare");
    let lost = created(&*st.a, "submit_report").await;
    let alive = created(&*st.a, "submit_report").await;
    st.a.transition(&lost.id, accept(), None).await.expect("accept");
    st.a.transition(&alive.id, accept(), None).await.expect("accept");
    let held = claim_all(&*st.a, 2, Duration::from_secs(5)).await;
    assert_eq!(held.len(), 2);
    let alive_item = held.iter().find(|i| i.execution_id == alive.id).expect("alive item").clone();
    // `a` keeps touching one item (a first time before `b` starts claiming) and abandons the other; `b` keeps claiming.
    st.a.touch_work(std::slice::from_ref(&alive_item)).await.expect("touch");
    let touching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let toucher = {
        let (a, touching) = (st.a.clone(), touching.clone());
        tokio::spawn(async move {
            while touching.load(std::sync::atomic::Ordering::SeqCst) {
                a.touch_work(std::slice::from_ref(&alive_item)).await.expect("touch");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut taken = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while taken.is_empty() && tokio::time::Instant::now() < until {
        for p in 0..st.b.queue_partitions() {
            taken.extend(st.b.claim_work(p, 10, Duration::from_millis(100)).await.expect("claim"));
        }
    }
    // Keep claiming a little longer: the touched work must still not be taken over (the lost one, untouched by
    // `b`, is taken over again: that is right).
    let more: Vec<WorkItem> = claim_all(&*st.b, 2, vis + Duration::from_millis(500))
        .await
        .into_iter()
        .filter(|i| i.execution_id == alive.id)
        .collect();
    touching.store(false, std::sync::atomic::Ordering::SeqCst);
    toucher.await.expect("toucher");
    assert!(more.is_empty(), "touched work was taken over: {more:?}");
    assert_eq!(taken.len(), 1, "only the untouched work is taken over: {taken:?}");
    assert_eq!(taken[0].execution_id, lost.id);
    assert!(taken[0].deliveries >= 2, "a take-over is a redelivery: {:?}", taken[0]);
}

pub async fn a_confirm_racing_a_cancel_is_answered_as_stored_and_leaves_no_runnable_work(b: Backend) {
    let st = stores(b, "confcancel", Duration::from_secs(30), 1000);
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    st.b.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    let mut ids = BTreeSet::new();
    let mut accepted = 0;
    for _ in 0..20 {
        let rec = created(&*st.a, "submit_report").await;
        let (a, other, seen) = (st.a.clone(), st.b.clone(), rec.clone());
        let confirm = tokio::spawn(async move { a.accept_and_claim(&seen.id, accept(), Some(&seen)).await });
        let seen = rec.clone();
        let cancel =
            tokio::spawn(
                async move { other.transition(&seen.id, finish(ExecutionStatus::Canceled), Some(&seen)).await },
            );
        let (confirm, claimed) = confirm.await.expect("task").expect("accept");
        let cancel = cancel.await.expect("task").expect("cancel");
        // Canceling is allowed from `received` and from `accepted`: it applies whichever came first.
        assert!(matches!(cancel, TransitionOutcome::Applied(_)), "{cancel:?}");
        let stored = st.b.get_execution(&rec.id).await.expect("get").expect("stored");
        assert_eq!(stored.status, ExecutionStatus::Canceled);
        let applied = matches!(confirm, TransitionOutcome::Applied(_));
        assert_eq!(stored.confirmed, applied, "CONFIRM's answer is what was stored: {confirm:?} / {stored:?}");
        accepted += usize::from(applied);
        if let Some(item) = claimed {
            // Claimed while accepted: the worker learns of the end and releases it.
            st.a.complete_work(&item, None, None).await.expect("release");
        }
        ids.insert(rec.id);
    }
    let runnable: Vec<WorkItem> = claim_all(&*st.b, 20, Duration::from_millis(600))
        .await
        .into_iter()
        .filter(|i| ids.contains(&i.execution_id) && i.snapshot.as_ref().is_none_or(|s| !s.status.is_terminal()))
        .collect();
    assert!(
        runnable.is_empty(),
        "work of canceled executions was handed out to run ({accepted} of 20 were accepted first): {runnable:?}"
    );
}

/// Two instances of the Redis store on one Redis (two processes), for the tests of its own layout.
fn redis_pair(b: Backend, name: &str) -> (Arc<RedisStore>, Arc<RedisStore>) {
    let cfg = redis_config(b, &unique_prefix(name), Duration::from_secs(30));
    let a = RedisStore::connect(cfg.clone(), scope(1000)).expect("connect a");
    let b = RedisStore::connect(cfg, scope(1000)).expect("connect b");
    (a, b)
}

pub async fn queued_work_that_is_not_its_execution_s_own_is_dropped_not_run(b: Backend) {
    // The memory store queues under its lock: only the Redis store can hold such work.
    if b == Backend::Memory {
        return;
    }
    let (a, other) = redis_pair(b, "stray");
    a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    other.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    let accepted = created(&*a, "submit_report").await;
    let r = a.transition(&accepted.id, accept(), Some(&accepted)).await.expect("accept");
    assert!(matches!(r, TransitionOutcome::Applied(_)), "{r:?}");
    let canceled = created(&*a, "submit_report").await;
    a.transition(&canceled.id, finish(ExecutionStatus::Canceled), None).await.expect("cancel");
    let missing = new_id(&*a, None);
    // Work as a CONFIRM that lost its race to another leaves it for a moment (its token is not the one that
    // accepted the execution), and work of executions that were never accepted or do not exist.
    let streams: BTreeSet<String> = [&accepted.id, &canceled.id, &missing]
        .iter()
        .map(|id| format!("{}:q:submit_report", a.execution_tag(id)))
        .collect();
    for (id, token) in [(&accepted.id, "stray.1"), (&canceled.id, "stray.2"), (&missing, "stray.3")] {
        let stream = format!("{}:q:submit_report", a.execution_tag(id));
        let cmd = ::redis::cmd("XADD").arg(&stream).arg("*").arg("id").arg(id).arg("tok").arg(token).clone();
        a.command::<String>("xadd", cmd).await.expect("xadd");
    }
    let items = claim_all(&*other, 4, Duration::from_secs(2)).await;
    let got: Vec<(&str, u64)> = items.iter().map(|i| (i.execution_id.as_str(), i.deliveries)).collect();
    assert_eq!(got, vec![(accepted.id.as_str(), 1)], "only the execution's own work is handed to a worker");
    let snapshot = items[0].snapshot.as_ref().expect("snapshot");
    assert_eq!((snapshot.status, snapshot.confirmed), (ExecutionStatus::Accepted, true));
    let mut left = 0;
    for stream in &streams {
        left += a.command::<u64>("xlen", ::redis::cmd("XLEN").arg(stream).clone()).await.expect("xlen");
    }
    assert_eq!(left, 1, "the stray entries were deleted; the claimed one stays until it is done");
}

/// The queue partition a worker reads for `id`'s work (the cluster reads one per shard).
fn partition_of(s: &RedisStore, id: &str) -> usize {
    if s.queue_partitions() == 1 {
        return 0;
    }
    let tag = s.execution_tag(id);
    tag.trim_end_matches('}').rsplit(':').next().and_then(|k| k.parse().ok()).expect("shard of the tag")
}

/// The distinct work entries of `id` handed out to run (a take-over hands the same entry out again: ST-5).
fn runnable_entries<'a>(id: &str, items: impl IntoIterator<Item = &'a WorkItem>) -> BTreeSet<String> {
    items
        .into_iter()
        .filter(|i| i.execution_id == id && i.snapshot.as_ref().is_none_or(|s| !s.status.is_terminal()))
        .map(|i| i.receipt.clone())
        .collect()
}

pub async fn a_confirm_transaction_run_twice_queues_runnable_work_once(b: Backend) {
    // The cluster client sends a request again when its connection dropped or its response timeout passed, also when
    // Redis had run it: the CONFIRM's transaction then runs twice, with the same token. The memory store has no such
    // client.
    if b == Backend::Memory {
        return;
    }
    let vis = Duration::from_millis(600);
    let cfg = redis_config(b, &unique_prefix("twice"), vis);
    let connect = || RedisStore::connect(cfg.clone(), scope(1000)).expect("connect");
    let (a, w1, w2, other) = (connect(), connect(), connect(), connect());
    for s in [&a, &w1, &w2, &other] {
        s.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    }

    // Without a free worker slot (no claim in the transaction), while workers of two other processes wait in
    // XREADGROUP: Redis hands each run's work to one of them as soon as that run's EXEC is done.
    let rec = created(&*a, "submit_report").await;
    let p = partition_of(&a, &rec.id);
    let waiting: Vec<_> = [w1.clone(), w2.clone()]
        .into_iter()
        .map(|w| tokio::spawn(async move { w.claim_work(p, 10, Duration::from_secs(1)).await.expect("claim") }))
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    a.send_transactions_twice(true);
    let r = a.transition(&rec.id, accept(), Some(&rec)).await.expect("accept");
    a.send_transactions_twice(false);
    let mut items = Vec::new();
    for w in waiting {
        items.extend(w.await.expect("worker"));
    }
    // And whatever is left, taken over once the claims lapse.
    items.extend(claim_all(&*other, 3, vis * 4).await);
    let runnable = runnable_entries(&rec.id, &items);
    assert_eq!(runnable.len(), 1, "one CONFIRM queued runnable work twice: {items:?}");
    assert!(
        matches!(r, TransitionOutcome::Applied(ref r) if r.status == ExecutionStatus::Accepted),
        "the CONFIRM that accepted is answered as applied, not as already confirmed: {r:?}"
    );

    // With a free worker slot: each run's transaction also claims for this process. The first run's claim is lost
    // with its reply; the work is handed out to run once all the same, also after that claim lapsed.
    let rec = created(&*a, "submit_report").await;
    a.send_transactions_twice(true);
    let (r, claimed) = a.accept_and_claim(&rec.id, accept(), Some(&rec)).await.expect("accept");
    a.send_transactions_twice(false);
    let mut items: Vec<WorkItem> = claimed.into_iter().collect();
    items.extend(claim_all(&*other, 3, vis * 4).await);
    let runnable = runnable_entries(&rec.id, &items);
    assert_eq!(runnable.len(), 1, "one CONFIRM queued runnable work twice: {items:?}");
    assert!(
        matches!(r, TransitionOutcome::Applied(ref r) if r.status == ExecutionStatus::Accepted),
        "the CONFIRM that accepted is answered as applied, not as already confirmed: {r:?}"
    );
}

pub async fn a_write_to_an_execution_that_expired_answers_not_found_and_leaves_nothing(b: Backend) {
    if b == Backend::Memory {
        return;
    }
    let (a, other) = redis_pair(b, "expired");
    a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    other.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    let id = new_id(&*a, None);
    let mut rec = record(&id, "submit_report", 30_000);
    rec.retain_until_ms = now_ms() + 200;
    assert_eq!(a.create_execution(rec.clone(), None).await.expect("create"), Created::New);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(a.get_execution(&id).await.expect("get").is_none(), "expired");
    // The caller still holds the record (as CONFIRM does from EXECUTE): the native writes find it gone.
    let (r, claimed) = a.accept_and_claim(&id, accept(), Some(&rec)).await.expect("accept");
    assert_eq!((r, claimed), (TransitionOutcome::NotFound, None));
    let r = other.transition(&id, finish(ExecutionStatus::Canceled), Some(&rec)).await.expect("cancel");
    assert_eq!(r, TransitionOutcome::NotFound);
    let key = format!("{}:x:{id}", a.execution_tag(&id));
    let exists: u64 = a.command("exists", ::redis::cmd("EXISTS").arg(&key).clone()).await.expect("exists");
    assert_eq!(exists, 0, "a write to the expired execution left a record behind");
    assert!(claim_all(&*other, 1, Duration::from_millis(300)).await.is_empty(), "no work was left queued");
}

pub async fn confirm_claims_its_work_over_resp3_too(b: Backend) {
    // The reply of the CONFIRM's transaction is parsed by hand: with `protocol=resp3` its `XREADGROUP` is a map.
    if b != Backend::Redis {
        return;
    }
    let url = format!("{}?protocol=resp3", shared_server().url());
    let cfg =
        RedisConfig::new(url).with_key_prefix(unique_prefix("resp3")).with_visibility_timeout(Duration::from_secs(30));
    let a = RedisStore::connect(cfg, scope(1000)).expect("connect");
    a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    // The work just queued is the one claimed.
    let rec = created(&*a, "submit_report").await;
    let (r, claimed) = a.accept_and_claim(&rec.id, accept(), Some(&rec)).await.expect("accept");
    assert!(matches!(r, TransitionOutcome::Applied(_)), "{r:?}");
    let item = claimed.expect("the CONFIRM claimed its work but did not hand it over");
    assert_eq!((item.execution_id.as_str(), item.deliveries), (rec.id.as_str(), 1));
    a.complete_work(&item, None, None).await.expect("release");
    // Older unclaimed work of the queue (in the same shard) is claimed instead.
    let older = created(&*a, "submit_report").await;
    let r = a.transition(&older.id, accept(), Some(&older)).await.expect("accept");
    assert!(matches!(r, TransitionOutcome::Applied(_)), "{r:?}");
    let newer = loop {
        let rec = created(&*a, "submit_report").await;
        if a.execution_tag(&rec.id) == a.execution_tag(&older.id) {
            break rec;
        }
    };
    let (r, claimed) = a.accept_and_claim(&newer.id, accept(), Some(&newer)).await.expect("accept");
    assert!(matches!(r, TransitionOutcome::Applied(_)), "{r:?}");
    let item = claimed.expect("the CONFIRM claimed older work but did not hand it over");
    assert_eq!(item.execution_id, older.id);
}

pub async fn idempotency_keys_return_the_existing_execution_or_conflict(b: Backend) {
    let st = stores(b, "idem", Duration::from_secs(30), 1000);
    let claim = |fp: &str| IdempotencyClaim { sender: SENDER.into(), key: "key-1".into(), fingerprint: fp.into() };
    let first = new_id(&*st.a, Some(&claim("f1")));
    assert_eq!(st.a.create_execution(record(&first, "c_x", 1000), Some(claim("f1"))).await.expect("c"), Created::New);
    let second = new_id(&*st.b, Some(&claim("f1")));
    match st.b.create_execution(record(&second, "c_x", 1000), Some(claim("f1"))).await.expect("c") {
        Created::Existing(r) => assert_eq!(r.id, first),
        other => panic!("expected the existing execution, got {other:?}"),
    }
    let third = new_id(&*st.b, Some(&claim("f2")));
    assert_eq!(
        st.b.create_execution(record(&third, "c_x", 1000), Some(claim("f2"))).await.expect("c"),
        Created::Conflict
    );
    assert!(st.a.get_execution(&second).await.expect("get").is_none(), "nothing was created for the replay");
}

pub async fn received_executions_are_bounded(b: Backend) {
    // The shared stores count per shard: with 16 shards and a limit of 16, each shard holds one.
    let st = stores(b, "full", Duration::from_secs(30), 16);
    let mut full = 0;
    for _ in 0..200 {
        let id = new_id(&*st.a, None);
        if st.a.create_execution(record(&id, "c_x", 1000), None).await.expect("create") == Created::Full {
            full += 1;
        }
    }
    assert!(full >= 200 - 16, "at most the limit is kept waiting for CONFIRM (refused {full} of 200)");
}

pub async fn replayed_nonces_are_refused(b: Backend) {
    let st = stores(b, "jti", Duration::from_secs(30), 1000);
    let until = now_ms() + 60_000;
    assert!(st.a.remember_jti(SENDER, "jti-1", until).await.expect("jti"));
    assert!(!st.b.remember_jti(SENDER, "jti-1", until).await.expect("jti"), "a replay in another process is seen");
    assert!(st.b.remember_jti(SENDER, "jti-2", until).await.expect("jti"));
    assert!(st.a.remember_jti("did:web:other.example.com", "jti-1", until).await.expect("jti"), "per issuer");
}

pub async fn negotiations_are_shared_and_expire(b: Backend) {
    let st = stores(b, "neg", Duration::from_secs(30), 1000);
    let now = now_ms();
    let rec = |id: &str, ttl: u64| NegotiationRecord {
        id: id.into(),
        sender: SENDER.into(),
        capability: "c_x".into(),
        agreed_schema: Arc::new(json!({"type": "object"})),
        schema_digest: None,
        timeout_ms: 1000,
        confirm_window_ms: 1000,
        created_at_ms: now,
        expires_at_ms: now + ttl,
    };
    st.a.put_negotiation(rec("n_long", 60_000)).await.expect("put");
    st.a.put_negotiation(rec("n_short", 200)).await.expect("put");
    assert_eq!(st.b.get_negotiation("n_long").await.expect("get"), Some(rec("n_long", 60_000)));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(st.b.get_negotiation("n_short").await.expect("get"), None, "expired");
    assert_eq!(st.b.get_negotiation("n_missing").await.expect("get"), None);
}

/// Returns once `a` hears the terminal signals of `b`'s writes (its pub/sub subscription is up, which takes a
/// moment after connecting): cancels executions in `b` until `a` sees the signal of one.
async fn until_signals_flow(st: &Stores) {
    for _ in 0..100 {
        let rec = created(&*st.a, "submit_report").await;
        st.b.transition(&rec.id, finish(ExecutionStatus::Canceled), None).await.expect("cancel");
        if st.a.terminal_signal(&rec.id, Duration::from_millis(500)).await {
            return;
        }
    }
    panic!("no terminal signal of the other store instance came in 100 tries");
}

pub async fn long_poll_waits_are_woken_by_a_terminal_write_in_another_process(b: Backend) {
    let st = stores(b, "wake", Duration::from_secs(30), 1000);
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    let rec = created(&*st.a, "submit_report").await;
    st.a.transition(&rec.id, accept(), None).await.expect("accept");
    // The subscriptions are up before the write.
    until_signals_flow(&st).await;
    let writer = {
        let s = st.b.clone();
        let id = rec.id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            s.transition(&id, finish(ExecutionStatus::Canceled), None).await.expect("cancel")
        })
    };
    let (signal, woke) = tokio::join!(
        st.a.terminal_signal(&rec.id, Duration::from_secs(30)),
        st.a.wait_change(&rec.id, ExecutionStatus::Accepted, Duration::from_secs(30))
    );
    writer.await.expect("writer");
    assert!(signal, "the terminal signal came");
    assert_eq!(woke.expect("wait").expect("record").status, ExecutionStatus::Canceled);
}

pub async fn a_terminal_signal_that_came_before_the_wait_is_not_missed(b: Backend) {
    let st = stores(b, "signal", Duration::from_secs(30), 1000);
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    until_signals_flow(&st).await;
    // CONFIRM in `a` accepts, then waits for the terminal signal to release its admission slot (CONF-5); a worker of
    // another process (`b`) may have finished the work before that wait starts. The signal must count all the same:
    // a missed one holds the slot until the execution's deadline, and enough of them refuse every CONFIRM.
    for _ in 0..10 {
        let rec = created(&*st.a, "submit_report").await;
        let TransitionOutcome::Applied(acc) = st.a.transition(&rec.id, accept(), Some(&rec)).await.expect("t") else {
            panic!("accept refused")
        };
        // As a worker whose handler was done at once records it: start and end in one write.
        let ran = Transition::Ran {
            now_ms: now_ms(),
            rerun: false,
            status: ExecutionStatus::Succeeded,
            result: Some(json!({"ok": true})),
            error: None,
        };
        let done = st.b.transition(&rec.id, ran, Some(&acc)).await.expect("ran");
        assert!(matches!(done, TransitionOutcome::Applied(_)), "{done:?}");
        // Give the signal time to arrive first (ordering only: any delay must pass).
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            st.a.terminal_signal(&rec.id, Duration::from_secs(30)).await,
            "the terminal signal of {} came before the wait and was missed",
            rec.id
        );
    }
    // A signal still to come wakes the waiter, as before.
    let rec = created(&*st.a, "submit_report").await;
    st.a.transition(&rec.id, accept(), None).await.expect("accept");
    let writer = {
        let (s, id) = (st.b.clone(), rec.id.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            s.transition(&id, finish(ExecutionStatus::Canceled), None).await.expect("cancel")
        })
    };
    assert!(st.a.terminal_signal(&rec.id, Duration::from_secs(30)).await, "the terminal signal came");
    writer.await.expect("writer");
}

pub async fn registry_entries_of_dead_processes_lapse_and_deregister_removes_them(b: Backend) {
    let st = stores(b, "registry", Duration::from_secs(30), 1000);
    let decl = |name: &str| a2a_core::capability::CapabilityDeclaration {
        name: name.into(),
        description: "d".into(),
        auth_requirement: a2a_core::capability::AuthRequirement::None,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema: json!({"type": "object"}),
        output_schema: None,
        estimated_cost: None,
        estimated_latency_ms: None,
        fallback_for: vec!["generate_summary".into()],
    };
    let entry = |agent: &str, endpoint: &str, ttl_ms: u64| RegistryEntry {
        agent: agent.into(),
        endpoint: Some(endpoint.into()),
        capability: decl("generate_brief_summary"),
        updated_at_ms: now_ms(),
        expires_at_ms: Some(now_ms() + ttl_ms),
    };
    // Both stores connected first (lazily, with slot discovery on a cluster), so the short-lived entry's two
    // seconds are spent on the registrations and reads below, not on set-up under a loaded CI machine.
    st.registry_a.list().await.expect("list");
    st.registry_b.list().await.expect("list");
    st.registry_a.register(vec![entry("did:web:a.example.com", "http://a:1/a2a", 60_000)]).await.expect("register");
    st.registry_b.register(vec![entry("did:web:a.example.com", "http://a:2/a2a", 2_000)]).await.expect("register");
    st.registry_b.register(vec![entry("did:web:b.example.com", "http://b/a2a", 60_000)]).await.expect("register");
    let related = st.registry_a.related("generate_summary").await.expect("related");
    assert_eq!(related.len(), 3, "entries of every process: {related:?}");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let live = st.registry_b.list().await.expect("list");
    assert_eq!(live.len(), 2, "the entry that was not refreshed lapsed: {live:?}");
    st.registry_a.deregister("did:web:a.example.com", Some("http://a:1/a2a")).await.expect("deregister");
    let live = st.registry_b.list().await.expect("list");
    assert_eq!(live.iter().map(|e| e.agent.as_str()).collect::<Vec<_>>(), vec!["did:web:b.example.com"]);
}

pub async fn audit_records_are_bounded_and_queryable_by_sender_negotiation_and_execution(b: Backend) {
    use a2a_server::store::audit::{AuditLog, AuditQuery, AuditRecord, MemoryAudit, RedisAudit};
    let max = 50;
    let (one, two): (Arc<dyn AuditLog>, Arc<dyn AuditLog>) = match b {
        Backend::Memory => {
            let m: Arc<dyn AuditLog> = Arc::new(MemoryAudit::new(max));
            (m.clone(), m)
        }
        _ => {
            let cfg = redis_config(b, &unique_prefix("audit"), Duration::from_secs(30));
            let s1 = RedisStore::connect(cfg.clone(), scope(1000)).expect("connect");
            let s2 = RedisStore::connect(cfg, scope(1000)).expect("connect");
            (RedisAudit::new(s1, max as u64), RedisAudit::new(s2, max as u64))
        }
    };
    let rec = |i: usize| AuditRecord {
        time_ms: now_ms(),
        sender_id: format!("did:web:s{}.example.com", i % 3),
        capability: Some("submit_report".into()),
        negotiation_id: Some(format!("n_{}", i % 5)),
        execution_id: Some(format!("e_{i}")),
        agent: AGENT.into(),
        step: "execute".into(),
        outcome: "ok".into(),
        latency_us: i as u64,
        ..Default::default()
    };
    for i in 0..1000 {
        if i % 2 == 0 { one.record(rec(i)) } else { two.record(rec(i)) }
    }
    one.flush().await.expect("flush");
    two.flush().await.expect("flush");
    // `one` and `two` are two processes: the stream holds their records in the order they reached Redis, which is
    // not the order they were handed over (one writer may connect or run later than the other, and write all its
    // records after the other's). A record handed over after both flushes is the newest of all.
    two.record(rec(1000));
    two.flush().await.expect("flush");
    let q = |s: Option<&str>, n: Option<&str>, e: Option<&str>, limit| AuditQuery {
        sender_id: s.map(str::to_owned),
        negotiation_id: n.map(str::to_owned),
        execution_id: e.map(str::to_owned),
        limit,
    };
    let newest = one.query(&q(None, None, Some("e_1000"), 10)).await.expect("query");
    assert_eq!(newest.len(), 1, "the newest record, written by the other process, is found: {newest:?}");
    assert_eq!(newest, vec![AuditRecord { time_ms: newest[0].time_ms, ..rec(1000) }]);
    let by_sender = two.query(&q(Some("did:web:s1.example.com"), None, None, 5)).await.expect("query");
    assert_eq!(by_sender.len(), 5);
    assert!(by_sender.iter().all(|r| r.sender_id == "did:web:s1.example.com"));
    let by_neg = one.query(&q(None, Some("n_3"), None, 1000)).await.expect("query");
    assert!(!by_neg.is_empty() && by_neg.iter().all(|r| r.negotiation_id.as_deref() == Some("n_3")));
    let all = one.query(&q(None, None, None, 100_000)).await.expect("query");
    // Bounded: MAXLEN ~ trims whole stream nodes (about 100 entries), the memory log exactly.
    assert!(all.len() >= max && all.len() <= max + 200, "kept {} records for a bound of {max}", all.len());
    // Newest first: the last record first, and each writer's records in the order it was handed them.
    let n = |r: &AuditRecord| r.execution_id.as_deref().and_then(|e| e.strip_prefix("e_")?.parse::<usize>().ok());
    assert_eq!(all.first().and_then(n), Some(1000));
    for parity in [0, 1] {
        let mine: Vec<usize> = all.iter().filter_map(n).filter(|i| i % 2 == parity).collect();
        assert!(mine.windows(2).all(|w| w[0] > w[1]), "one writer's records out of order: {mine:?}");
    }
    assert!(one.query(&q(None, None, Some("e_0"), 10)).await.expect("query").is_empty(), "the oldest were trimmed");
}

macro_rules! run_suite {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::Backend::Memory).await } )*
        }
        mod redis {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::Backend::Redis).await } )*
        }
        mod cluster {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::Backend::Cluster).await } )*
        }
    };
}

run_suite!(
    transitions_follow_the_state_machine_and_never_go_backwards,
    first_terminal_write_wins_under_concurrency,
    concurrent_confirms_accept_once_and_queue_once,
    a_worker_that_ran_before_recording_its_start_records_both_in_one_step,
    confirm_with_a_stale_record_decides_on_the_stored_one,
    confirm_claims_queued_work_for_its_own_process_and_a_lost_claim_is_taken_over,
    queued_work_is_claimed_once_across_processes_and_released_when_done,
    work_of_a_lost_worker_is_taken_over_after_the_visibility_timeout,
    a_confirm_racing_a_cancel_is_answered_as_stored_and_leaves_no_runnable_work,
    queued_work_that_is_not_its_execution_s_own_is_dropped_not_run,
    a_confirm_transaction_run_twice_queues_runnable_work_once,
    a_write_to_an_execution_that_expired_answers_not_found_and_leaves_nothing,
    confirm_claims_its_work_over_resp3_too,
    idempotency_keys_return_the_existing_execution_or_conflict,
    received_executions_are_bounded,
    replayed_nonces_are_refused,
    negotiations_are_shared_and_expire,
    long_poll_waits_are_woken_by_a_terminal_write_in_another_process,
    a_terminal_signal_that_came_before_the_wait_is_not_missed,
    registry_entries_of_dead_processes_lapse_and_deregister_removes_them,
    audit_records_are_bounded_and_queryable_by_sender_negotiation_and_execution,
);

/// CONF-5 across a Redis fault: a terminal signal published while `a`'s subscription was down (its connection
/// killed, on a Redis of its own) is not waited for until the timeout. Once `a` subscribes again it wakes its waiters,
/// and each reads its record; before, CONFIRM's admission slot was held until the execution's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_signal_published_while_the_subscription_was_down_is_found_by_a_read() {
    let redis = crate::redis_support::RedisServer::start();
    let cfg = RedisConfig::new(redis.url()).with_key_prefix(unique_prefix("missed"));
    let (a, b) = (
        RedisStore::connect(cfg.clone(), scope(1000)).expect("connect a"),
        RedisStore::connect(cfg, scope(1000)).expect("connect b"),
    );
    let st = Stores {
        registry_a: Arc::new(RedisRegistry::new(a.clone(), vec![])),
        registry_b: Arc::new(RedisRegistry::new(b.clone(), vec![])),
        a,
        b,
    };
    st.a.prepare_queue(&["submit_report".into()]).await.expect("prepare");
    until_signals_flow(&st).await;
    let rec = created(&*st.a, "submit_report").await;
    st.a.transition(&rec.id, accept(), Some(&rec)).await.expect("accept");
    let waiting = {
        let (s, id) = (st.a.clone(), rec.id.clone());
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            (s.terminal_signal(&id, Duration::from_secs(60)).await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Every subscription is cut; the cancel is published at once, before `a` subscribes again (100 ms backoff).
    redis.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]).expect("redis-cli CLIENT KILL");
    st.b.transition(&rec.id, finish(ExecutionStatus::Canceled), None).await.expect("cancel");
    let (signalled, took) = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the wait ended well before its 60 s")
        .expect("no panic");
    assert!(signalled, "the terminal state was found after {took:?}");
}
