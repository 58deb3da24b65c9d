//! Where a negotiation or an execution lives (GW-2): `negotiation_id → agent` is recorded when NEGOTIATE succeeds,
//! `execution_id → agent` when EXECUTE does, each for the lifetime of what it names. EXECUTE, CONFIRM, RESULT and
//! CANCEL are sent where their route points; `(sender, Idempotency-Key) → agent` is recorded with the execution.
//!
//! [`MemoryRoutes`] keeps routes in this process (the embedded default). [`RedisRoutes`] shares them between every
//! gateway on one Redis (string keys `<prefix>:gw:n:<id>` and `<prefix>:gw:x:<id>` with `PX` expiry, written before
//! the answer is returned, so that the caller's next step may go to any gateway), with a local cache in front:
//! a route never changes once written, so a cached one is always right until it expires.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_runtime::store::{RedisStore, StoreError, now_ms};

/// What a route names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A negotiation id.
    Negotiation,
    /// An execution id.
    Execution,
    /// A sender's `Idempotency-Key` (`<sender> <key>`), recorded with its execution: the key reused with a
    /// negotiation at another agent is a conflict the gateway sees and no agent can (EXE-7, GW-6).
    Idempotency,
}

impl Kind {
    fn tag(self) -> &'static str {
        match self {
            Kind::Negotiation => "n",
            Kind::Execution => "x",
            Kind::Idempotency => "k",
        }
    }
}

/// Where a negotiation or execution lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The agent's endpoint URL.
    pub agent: Arc<str>,
    /// The capability it is about.
    pub capability: Arc<str>,
    /// The sender the negotiation or execution belongs to (the `A2A-Sender-ID` of the step that created it, or the
    /// verified caller the gateway forwarded for, GW-8): another sender naming the id is answered as if it did not
    /// exist (GW-21). `None` for routes written without one (the A2A 1.x bridge's tasks; records of earlier versions).
    pub owner: Option<Arc<str>>,
}

impl Route {
    fn encode(&self, expires_at_ms: u64) -> String {
        match &self.owner {
            Some(o) => format!("{}\n{}\n{expires_at_ms}\n{o}", self.agent, self.capability),
            None => format!("{}\n{}\n{expires_at_ms}", self.agent, self.capability),
        }
    }

    fn decode(s: &str) -> Option<(Route, u64)> {
        let mut it = s.splitn(4, '\n');
        let agent = it.next()?;
        let capability = it.next()?;
        let exp = it.next()?.parse().ok()?;
        let owner = it.next().map(Arc::from);
        Some((Route { agent: agent.into(), capability: capability.into(), owner }, exp))
    }
}

/// A store of routes.
#[async_trait::async_trait]
pub trait Routes: Send + Sync + 'static {
    /// Records a route for `ttl`.
    async fn put(&self, kind: Kind, id: &str, route: Route, ttl: Duration) -> Result<(), StoreError>;
    /// The route of an id, if recorded and not expired.
    async fn get(&self, kind: Kind, id: &str) -> Result<Option<Route>, StoreError>;
    /// The route of an id when this process holds it (no I/O): the usual case, tried before [`Routes::get`].
    fn get_held(&self, _kind: Kind, _id: &str) -> Option<Route> {
        None
    }
}

/// Shards of a [`RouteTable`] (a lock each).
const SHARDS: usize = 16;

struct Shard {
    map: HashMap<Arc<str>, (Route, Instant), foldhash::fast::RandomState>,
    /// Keys in the order they were written, with the expiry they were written with (a key written again has a later
    /// entry; an entry whose expiry no longer matches the map's is stale and skipped).
    order: VecDeque<(Arc<str>, Instant)>,
}

/// Routes of one kind: a map from id to route with an expiry and a bound. A full shard drops its oldest routes
/// (routes are written once and read soon after, so the oldest written is the least likely to be read again).
struct RouteTable {
    shards: Vec<Mutex<Shard>>,
    hasher: foldhash::fast::RandomState,
    per_shard: usize,
}

impl RouteTable {
    fn new(max: u64) -> Self {
        let hasher = foldhash::fast::RandomState::default();
        let per_shard = (max as usize).div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS)
            .map(|_| Mutex::new(Shard { map: HashMap::with_hasher(hasher.clone()), order: VecDeque::new() }))
            .collect();
        RouteTable { shards, hasher, per_shard }
    }

    fn shard(&self, id: &str) -> std::sync::MutexGuard<'_, Shard> {
        let i = (self.hasher.hash_one(id) % SHARDS as u64) as usize;
        self.shards[i].lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn put(&self, id: &str, route: Route, until: Instant) {
        let mut s = self.shard(id);
        let now = Instant::now();
        // Expired and stale entries at the front go first; then the oldest while the shard is full.
        while let Some((k, t)) = s.order.front() {
            let live = s.map.get(k).is_some_and(|(_, u)| u == t);
            if live && *t > now && s.map.len() < self.per_shard {
                break;
            }
            let (k, t) = s.order.pop_front().unwrap_or_else(|| unreachable!());
            if s.map.get(&k).is_some_and(|(_, u)| *u == t) {
                s.map.remove(&k);
            }
        }
        let key: Arc<str> = id.into();
        s.map.insert(key.clone(), (route, until));
        s.order.push_back((key, until));
        // Ids written again leave stale entries behind a live front: drop them before the queue outgrows the map.
        if s.order.len() > 2 * self.per_shard {
            let Shard { map, order } = &mut *s;
            order.retain(|(k, t)| map.get(k).is_some_and(|(_, u)| u == t));
        }
    }

    fn get(&self, id: &str, now: Instant) -> Option<Route> {
        let s = self.shard(id);
        s.map.get(id).filter(|(_, until)| *until > now).map(|(r, _)| r.clone())
    }
}

/// Routes held in this process, at most `max` of each kind (the oldest dropped first).
pub struct MemoryRoutes {
    tables: [RouteTable; 3],
}

impl MemoryRoutes {
    /// A store holding at most `max` routes of each kind.
    pub fn new(max: u64) -> Self {
        MemoryRoutes { tables: [RouteTable::new(max), RouteTable::new(max), RouteTable::new(max)] }
    }

    fn put_local(&self, kind: Kind, id: &str, route: Route, ttl: Duration) {
        self.tables[kind as usize].put(id, route, Instant::now() + ttl);
    }

    fn get_local(&self, kind: Kind, id: &str) -> Option<Route> {
        self.tables[kind as usize].get(id, Instant::now())
    }
}

#[async_trait::async_trait]
impl Routes for MemoryRoutes {
    async fn put(&self, kind: Kind, id: &str, route: Route, ttl: Duration) -> Result<(), StoreError> {
        self.put_local(kind, id, route, ttl);
        Ok(())
    }

    async fn get(&self, kind: Kind, id: &str) -> Result<Option<Route>, StoreError> {
        Ok(self.get_local(kind, id))
    }

    fn get_held(&self, kind: Kind, id: &str) -> Option<Route> {
        self.get_local(kind, id)
    }
}

/// Routes on Redis, shared by every gateway using the same key prefix, with a local cache.
pub struct RedisRoutes {
    store: Arc<RedisStore>,
    prefix: String,
    local: MemoryRoutes,
}

impl RedisRoutes {
    /// Routes on the store's Redis, caching at most `max_local` in this process.
    pub fn new(store: Arc<RedisStore>, max_local: u64) -> Self {
        let prefix = format!("{}:gw", store.key_prefix());
        RedisRoutes { store, prefix, local: MemoryRoutes::new(max_local) }
    }

    fn key(&self, kind: Kind, id: &str) -> String {
        format!("{}:{}:{id}", self.prefix, kind.tag())
    }
}

#[async_trait::async_trait]
impl Routes for RedisRoutes {
    async fn put(&self, kind: Kind, id: &str, route: Route, ttl: Duration) -> Result<(), StoreError> {
        let ms = ttl.as_millis().max(1) as u64;
        let value = route.encode(now_ms() + ms);
        self.store
            .command::<()>("route put", redis::cmd("SET").arg(self.key(kind, id)).arg(value).arg("PX").arg(ms).clone())
            .await?;
        self.local.put_local(kind, id, route, ttl);
        Ok(())
    }

    async fn get(&self, kind: Kind, id: &str) -> Result<Option<Route>, StoreError> {
        if let Some(r) = self.local.get_local(kind, id) {
            return Ok(Some(r));
        }
        let v: Option<String> =
            self.store.command("route get", redis::cmd("GET").arg(self.key(kind, id)).clone()).await?;
        let Some((route, exp)) = v.as_deref().and_then(Route::decode) else { return Ok(None) };
        let now = now_ms();
        if exp <= now {
            return Ok(None);
        }
        self.local.put_local(kind, id, route.clone(), Duration::from_millis(exp - now));
        Ok(Some(route))
    }

    fn get_held(&self, kind: Kind, id: &str) -> Option<Route> {
        self.local.get_local(kind, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_round_trip_their_encoding() {
        let r = Route { agent: "http://127.0.0.1:1/a2a".into(), capability: "submit_report".into(), owner: None };
        assert_eq!(Route::decode(&r.encode(42)), Some((r.clone(), 42)));
        let owned = Route { owner: Some("did:web:a.example:x_y".into()), ..r };
        assert_eq!(Route::decode(&owned.encode(42)), Some((owned, 42)));
        assert_eq!(Route::decode("garbage"), None);
    }

    #[tokio::test]
    async fn memory_routes_expire() {
        let m = MemoryRoutes::new(10);
        let r = Route { agent: "a".into(), capability: "b".into(), owner: None };
        m.put(Kind::Negotiation, "n1", r.clone(), Duration::from_millis(30)).await.expect("put");
        assert_eq!(m.get(Kind::Negotiation, "n1").await.expect("get"), Some(r));
        assert_eq!(m.get(Kind::Execution, "n1").await.expect("get"), None);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(m.get(Kind::Negotiation, "n1").await.expect("get"), None);
    }

    #[test]
    fn a_full_table_drops_its_oldest_routes_and_keeps_its_bound() {
        let t = RouteTable::new(SHARDS as u64 * 4);
        let r = |i: usize| Route { agent: format!("a{i}").into(), capability: "c".into(), owner: None };
        let until = Instant::now() + Duration::from_secs(60);
        for i in 0..1000 {
            t.put(&format!("id{i}"), r(i), until);
        }
        let held: usize = t.shards.iter().map(|s| s.lock().expect("shard").map.len()).sum();
        assert!(held <= SHARDS * 4, "{held} routes held");
        assert_eq!(t.get("id999", Instant::now()), Some(r(999)), "the newest is kept");
        assert_eq!(t.get("id0", Instant::now()), None, "the oldest is dropped");
        // Written again: the new route, and the queue's old entry for it is not mistaken for it.
        t.put("id999", r(5), until);
        assert_eq!(t.get("id999", Instant::now()), Some(r(5)));
        let queued: usize = t.shards.iter().map(|s| s.lock().expect("shard").order.len()).sum();
        assert!(queued <= SHARDS * 4 + 1, "{queued} queued");
    }
}
