//! The Redis store: many `a2a-server` processes on one Redis (or Redis Cluster) behave as one agent, and work left by
//! a crashed process is taken over by another.
//!
//! ## Keys
//!
//! Everything about one execution lives in one *shard*: `{<prefix>:<ns>:<k>}` where `ns` is a digest of the agent's
//! DID (two agents on one Redis never share state) and `k = fnv1a(execution_id) % shards`. The braces are a Redis
//! Cluster hash tag, so that the keys one transaction (`MULTI`/`EXEC`) or script touches are in one slot:
//!
//! | key | type | holds | expires |
//! |---|---|---|---|
//! | `{…:k}:x:<execution_id>` | hash `c`, `a`, `n`, `s`, `t`, `w:<token>` | the execution, one field per stage (below) | at the record's retention |
//! | `{…:k}:received` | sorted set | executions waiting for CONFIRM, by `confirm_by` (the `max_received` limit) | members leave on CONFIRM, on cancel, or when their window elapsed and the set is full |
//! | `{…:k}:i:<sha256(sender, key)>` | string | `execution_id \n fingerprint` of an `Idempotency-Key` | with its execution |
//! | `{…:k}:q:<capability>` | stream + group `workers` | queued and claimed work, entries `id`, `tok`; deleted when done | `MAXLEN ~` bound |
//! | `<prefix>:<ns>:n:<id>` | string | a negotiation (JSON) | at its expiry |
//! | `{<prefix>:<ns>:s:<sha256(sender)>}:n` | sorted set | a sender's negotiation ids by expiry (LIM-4) | with its last negotiation |
//! | `{<prefix>:<ns>:s:<sha256(issuer)>}:j` | sorted set | a signer's replay nonces, `sha256(issuer, jti)` by expiry (LIM-5) | with its last nonce |
//! | `{<prefix>:<ns>:s:<sha256(sender)>}:r` | sorted set | a sender's executions waiting for CONFIRM, by `confirm_by` (LIM-5) | when the last window closes |
//! | channel `{…:k}:done` | pub/sub | ids of the shard's executions that became terminal (wakes long-polls) | — |
//!
//! The execution's hash ([`layout`]): `c` the fields fixed at creation (JSON, written once by EXECUTE); `a` the
//! acceptance (`<token> <at> <verified> <traceparent>`, written once by CONFIRM, or `-` when the execution was
//! canceled before it was confirmed); `n` and `s` the starts a worker recorded and the time of the last; `t` the
//! terminal state (JSON: status, time, result or error); `w:<token>` the work entry of that CONFIRM token that runs
//! (see "Requests sent again"). Status, deadline, timestamps, attempts and revision are derived from them. The
//! channel is per shard so that the terminal write's `PUBLISH` is in the transaction's slot.
//!
//! This layout (and the work entries and channels) is not that of versions before it: a Redis holding an older
//! version's executions must be emptied (or the key prefix changed) when upgrading; processes of this version
//! interoperate.
//!
//! ## Atomicity
//!
//! No warm transition reads or compares the record: each stage writes its own field with a native primitive that
//! decides the race, in one `MULTI`/`EXEC` with everything that must happen with it. [`ExecutionRecord::apply`] first
//! checks the transition against the record the caller has (`seen`, or a read); since an execution never moves
//! backwards, the stored state is the same or later, and the guards below refuse what the state machine would refuse
//! from it:
//!
//! - CONFIRM (`Accept`): `HSETNX a` — the first CONFIRM wins; a cancel before it has set `a` to `-`. In the same
//!   transaction: the record's expiry, `ZREM` from `received`, `XADD` of the work with the CONFIRM's token, and, with
//!   a free worker slot, `XREADGROUP` (no `BLOCK`) of the oldest unclaimed work for this process (usually that work).
//!   A CONFIRM that lost its `HSETNX` reads the record: if `a` holds another token, the work it queued is not the
//!   execution's and it deletes it (`XACK` + `XDEL`), and a worker that gets such an entry first finds that its token
//!   is not the one in `a` and drops it too, so the handler never runs for a duplicate CONFIRM; if `a` holds its own
//!   token, an earlier run of its own transaction won (see "Requests sent again").
//! - The end (`Finish`; `Ran`, a start and end in one): `HSETNX t` — the first terminal write wins (ST-2) and nothing
//!   moves after it. With it: the expiry, the release of the worker's work (`XACK` + `XDEL`), `PUBLISH`, for an
//!   execution still `received`, `HSETNX a -` and `ZREM` (a CONFIRM racing the cancel either wins first, and the
//!   cancel then ends an accepted execution, or fails), and `HMGET a n`: the record the write was computed from may
//!   be stale (accepted or started elsewhere since), and the final record this process keeps must be the stored one.
//!   Unlike the compare-and-set of earlier versions, a worker's `Ran` is not refused because a worker that took the
//!   work over recorded a start meanwhile: both ran the handler (ST-5 allows it for taken-over work), and the first
//!   end written is the execution's (ST-2).
//! - A worker's start (`Start`, only for a handler still running after 10 ms) and creation with an
//!   `Idempotency-Key` are short Lua scripts: the start must not count an attempt after the end or start twice
//!   without a take-over, the key must be checked and claimed with the creation. They write the same fields, so they
//!   stay correct against the transactions running beside them.
//! - EXECUTE without a key: `ZADD` to `received`, `ZCARD`, `HSET c`, expiries. Over the `max_received` bound it drops
//!   the entries whose window elapsed and counts again, and if still over, removes what it added and refuses
//!   (`Created::Full`): the bound is never exceeded, and creations racing at the bound may be refused a little early.
//!
//! Every transaction also checks that the record exists (`HEXISTS c`): a write to an execution that expired meanwhile
//! is undone and answers `NotFound`. A refused write reads the record (`HGETALL`) to answer with it; that and the
//! cleanups above are the rare paths' extra round trips (a CONFIRM that lost takes two: the read, then the deletion
//! of its work). Work taken by the workers' blocking `XREADGROUP` or taken over from a lost worker (`XAUTOCLAIM`),
//! and work a CONFIRM's transaction claimed other than its own, is checked the same way: per claimed item, pipelined,
//! `HSETNX w:<token> <entry id>` and `HGETALL`, which is also the worker's snapshot; items that are not the
//! execution's own (a wrong token, or another entry of the token checked first), or of an execution that ended or
//! expired, are released (with the hash that `HSETNX` made of an expired execution).
//!
//! ## Requests sent again
//!
//! The Redis Cluster client (redis-rs 1.8, `cluster_async`) sends a request again, up to `retries` (2) times, when it
//! failed with an I/O error: a dropped connection (`RetryMethod::Reconnect`) or the node connection's response
//! timeout (`io::ErrorKind::TimedOut`, `RetryImmediately`; that timeout is `op_timeout_ms`, so the operation's own
//! deadline, as long and started first, usually drops the request before, and the client sends nothing for a caller
//! that is gone). Redis may have run the request before the failure: the request then runs twice, with the same
//! bytes. The single-node connection manager never sends a request again. A redirection does not make a transaction
//! run twice: `MOVED`, `ASK`, `TRYAGAIN` or `CLUSTERDOWN` answer the commands queued after `MULTI`, Redis refuses the
//! `EXEC` (`EXECABORT`), and the client gives the aborted transaction back without following it (a store error).
//!
//! CONFIRM's transaction run twice carries its token twice: the second run's `HSETNX a` fails, but its `XADD` queues
//! the work a second time with that token, and Redis may hand it at once to a worker waiting in `XREADGROUP`. The
//! workers' check makes that harmless: the first entry of a token checked (`HSETNX w:<token>`) is the execution's
//! work and any other entry of that token is released, so the handler runs once, on either entry (a take-over checks
//! the same entry again and passes). The work a CONFIRM claims in its own transaction is not checked: that reply
//! shows its `HSETNX a` applied, so no earlier run of it ran (it would have set `a`) and no later one follows (the
//! reply came). A CONFIRM whose reply shows `HSETNX a` failed but whose read finds its own token in `a` was applied by
//! an earlier run: it answers as applied (202, and holds its admission slot), keeps the work its run queued and
//! checks what that run claimed like a worker. This costs no round trip on the warm path (an `HSETNX` beside each
//! claimed item's `HGETALL`; none for the work a CONFIRM claims for itself).
//!
//! Other writes are not protected this way: a start script run twice finds its own start and is refused (the worker
//! stops the handler, and the work is taken over and run again after the visibility timeout); the end's transaction
//! run twice is answered as refused with the record it wrote; a creation with an `Idempotency-Key` run twice answers
//! with the execution it created as an existing one. None of them queues work.
//!
//! ## Round trips
//!
//! Per execution of the warm path, when one process serves it: EXECUTE 1 (the negotiation is cached; two requests
//! sent together, the creation and the sender's share of LIM-5, which [`RedisStore::round_trips`] counts as two);
//! CONFIRM 1 (the record EXECUTE created here is `seen`, so no read; the transaction accepts, queues and claims); the
//! worker 1
//! (a handler done within 10 ms records its start and its end in one transaction, [`Transition::Ran`], which also
//! releases the work and publishes; a longer one runs the start script first, one more); RESULT with long-poll 0 (a
//! terminal record is final, ST-2, so the process that wrote or read one serves later reads from memory; a long-poll
//! that finds none starts from the record this process last wrote, [`Store::get_execution_for_wait`], and is woken
//! locally by the worker's write). That is 3. CONFIRM on a process that did not create the execution reads it first
//! (+1), one without a free worker slot leaves the work to the workers' blocking `XREADGROUP` (+2, its read and the
//! check of the items it took, shared by the items taken at once), and a RESULT on a process that did not write the
//! execution reads it (+1, then the pub/sub wake-up). `docs/BENCHMARKS.md` has the measured figure.
//!
//! What this process knows without a read (the record it created, the last it wrote, the final ones it wrote or
//! read) is one map under a lock ([`local`]), bounded in bytes and age.
//!
//! The terminal write's `PUBLISH` reaches this process's own subscriber too, possibly before the write's reply: such
//! a message is held until the reply has made the record known here as final, so that the local waiters it wakes
//! find it there instead of reading it again (`Waiters`); another process's messages are delivered at once.
//!
//! ## Per-sender bounds (LIM-4, LIM-5)
//!
//! NEGOTIATE and a signed request each run one short script on their sender's sorted set (its own hash tag): it drops
//! the members that expired (`ZREMRANGEBYSCORE`, which removes only those, so its cost is `O(log n)` per call
//! amortised), counts (`ZCARD`, `O(1)`) and adds (`ZADD`, `O(log n)`). A sender at `max_negotiations_per_sender`
//! has its own negotiation closest to expiry removed (`ZPOPMIN` and `DEL`); a signer at `max_nonces_per_sender` is
//! refused (a nonce is never forgotten before it expires). On a single Redis the negotiation's own key is written in
//! the same script (one round trip, as before); on a cluster the script and the write are two, in that order.
//!
//! EXECUTE runs the same script as a signed request on the sender's executions waiting for CONFIRM (member the
//! execution id, score its `confirm_by`; one past `max_received_per_sender` is refused), sent beside the creation so
//! that it costs no round trip of latency (two requests on the one connection): a creation the script refused is
//! undone (`ZREM`, `DEL`), and an id the script admitted whose creation did not happen (an `Idempotency-Key` already
//! used, the shard's bound) is removed again. CONFIRM and a cancel of a `received` execution remove it (`ZREM`, in
//! their transaction on a single Redis; on a cluster right after it, the sender's key being in another slot), and a
//! window that elapsed drops it from the count (`ZREMRANGEBYSCORE`), so a sender whose CONFIRMs were lost is never
//! held out for longer than its confirm windows.
//! Nonces stored by earlier versions (`<prefix>:<ns>:j:<digest>` strings) are not consulted: processes of this
//! version must not serve beside older ones for the 330 s a nonce lives.
//!
//! ## Failure
//!
//! Every operation has a deadline (`op_timeout_ms`); a Redis that is down or slow is a [`StoreError`] (the router
//! answers `503 store_unavailable`), never a hang. Connections re-establish themselves when Redis is back.

mod layout;
mod local;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use a2a_core::wire::ExecutionStatus;
use futures_util::StreamExt;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use redis::{Cmd, Pipeline, RedisFuture, Script, Value};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use self::layout::{Fields, Stored};
use self::local::{Known, Local};
use super::{
    Admitted, Created, ExecutionRecord, Executions, IdempotencyClaim, NegotiationRecord, Nonce, QuotaExceeded,
    ReplayMemory, Store, StoreError, Transition, TransitionOutcome, WorkItem, WorkQueue, now_ms,
};

/// How to reach Redis and how to lay out the state in it (`[store]` of the configuration).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RedisConfig {
    /// `redis://host:port/db` (or `rediss://`); for a cluster, one or more seed nodes separated by commas.
    pub url: String,
    /// Whether `url` names Redis Cluster nodes.
    pub cluster: bool,
    /// First part of every key (no braces).
    pub key_prefix: String,
    /// Shards of the execution keys (hash tags; spread over a cluster's nodes). Every process must use the same
    /// number; changing it orphans the executions and work stored under the old one.
    pub shards: u16,
    /// How long claimed work may go untouched before another worker takes it over, in milliseconds.
    pub visibility_timeout_ms: u64,
    /// Deadline of one Redis operation, in milliseconds.
    pub op_timeout_ms: u64,
    /// Deadline of connecting to Redis, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Bound of each work stream (`XADD MAXLEN ~`): work beyond it is dropped, oldest first.
    pub max_queue_len: u64,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            url: "redis://127.0.0.1:6379".into(),
            cluster: false,
            key_prefix: "a2a".into(),
            shards: 16,
            visibility_timeout_ms: 30_000,
            op_timeout_ms: 2_000,
            connect_timeout_ms: 1_000,
            max_queue_len: 1_000_000,
        }
    }
}

impl RedisConfig {
    /// A configuration for this URL, everything else default.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig { url: url.into(), ..Default::default() }
    }

    /// Names a cluster: `url` is a comma-separated list of seed nodes.
    #[must_use]
    pub fn with_cluster(mut self, cluster: bool) -> Self {
        self.cluster = cluster;
        self
    }

    /// Sets the key prefix.
    #[must_use]
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Sets the visibility timeout.
    #[must_use]
    pub fn with_visibility_timeout(mut self, t: Duration) -> Self {
        self.visibility_timeout_ms = t.as_millis() as u64;
        self
    }

    /// Sets the deadline of one operation.
    #[must_use]
    pub fn with_op_timeout(mut self, t: Duration) -> Self {
        self.op_timeout_ms = t.as_millis() as u64;
        self
    }

    /// The seed URLs.
    pub fn urls(&self) -> Vec<String> {
        self.url.split(',').map(str::trim).filter(|u| !u.is_empty()).map(str::to_owned).collect()
    }

    /// Checks the values; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.urls().is_empty() {
            return Err("store.redis_url: give a URL such as redis://127.0.0.1:6379".into());
        }
        for u in self.urls() {
            redis::Client::open(u.as_str()).map_err(|e| format!("store.redis_url {u:?}: {e}"))?;
        }
        if !self.cluster && self.urls().len() > 1 {
            return Err("store.redis_url: several URLs name a cluster; set store.redis_cluster = true".into());
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}']) {
            return Err("store.key_prefix: must be non-empty and without braces".into());
        }
        if self.shards == 0 {
            return Err("store.shards: must be at least 1".into());
        }
        if self.visibility_timeout_ms < 100 || self.op_timeout_ms == 0 || self.connect_timeout_ms == 0 {
            return Err("store: visibility_timeout_ms must be at least 100, op_timeout_ms and connect_timeout_ms \
                        at least 1"
                .into());
        }
        Ok(())
    }
}

/// What the agent tells the store about itself.
#[derive(Debug, Clone)]
pub struct AgentScope {
    /// The agent's DID: its state is kept apart from other agents' on the same Redis.
    pub did: String,
    /// How long a terminal execution stays readable.
    pub retention: Duration,
    /// Executions waiting for CONFIRM at most (counted per shard: this divided by the shards, rounded up).
    pub max_received: usize,
}

/// A connection: a self-reconnecting multiplexed one, or a cluster connection; counts its round trips.
#[derive(Clone)]
struct Conn {
    inner: ConnKind,
    round_trips: Arc<AtomicU64>,
    /// Test hook ([`RedisStore::send_transactions_twice`]): every transaction is sent twice.
    twice: Arc<AtomicBool>,
}

#[derive(Clone)]
enum ConnKind {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        match &mut self.inner {
            ConnKind::Single(c) => c.req_packed_command(cmd),
            ConnKind::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        if pipeline.is_transaction() && self.twice.load(Ordering::Relaxed) {
            return Box::pin(async move {
                // The first reply is lost, as when the cluster client sends a request again after its connection
                // dropped or its response timeout passed while Redis had run it.
                let _lost = self.send_commands(pipeline, offset, count).await;
                self.send_commands(pipeline, offset, count).await
            });
        }
        self.send_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        match &self.inner {
            ConnKind::Single(c) => c.get_db(),
            ConnKind::Cluster(c) => c.get_db(),
        }
    }
}

impl Conn {
    fn send_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        match &mut self.inner {
            ConnKind::Single(c) => c.req_packed_commands(pipeline, offset, count),
            ConnKind::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }
}

/// Connects on demand and keeps the connection; a cluster connection is re-made after it failed to connect.
struct Connector {
    cfg: RedisConfig,
    round_trips: Arc<AtomicU64>,
    twice: Arc<AtomicBool>,
    /// Response timeout of the connections made (blocking reads need more than an operation's deadline); `None` when
    /// every request runs under `RedisStore::run`'s deadline (the main connection): a second timer per request inside
    /// a single connection would only cost. A cluster connection always has one (the operation's deadline).
    response_timeout: Option<Duration>,
    single: Option<ConnectionManager>,
    cluster: tokio::sync::Mutex<Option<ClusterConnection>>,
}

impl Connector {
    fn new(
        cfg: &RedisConfig,
        round_trips: Arc<AtomicU64>,
        twice: Arc<AtomicBool>,
        response_timeout: Option<Duration>,
    ) -> Result<Self, StoreError> {
        let single = if cfg.cluster {
            None
        } else {
            let url = cfg.urls().into_iter().next().unwrap_or_default();
            let client = redis::Client::open(url.as_str()).map_err(|e| StoreError(format!("{url}: {e}")))?;
            let config = ConnectionManagerConfig::new()
                .set_response_timeout(response_timeout)
                .set_connection_timeout(Some(Duration::from_millis(cfg.connect_timeout_ms)))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_millis(500));
            Some(
                ConnectionManager::new_lazy_with_config(client, config)
                    .map_err(|e| StoreError(format!("redis {url}: {e}")))?,
            )
        };
        Ok(Connector {
            cfg: cfg.clone(),
            round_trips,
            twice,
            response_timeout,
            single,
            cluster: tokio::sync::Mutex::new(None),
        })
    }

    async fn get(&self) -> Result<Conn, StoreError> {
        let inner = match &self.single {
            Some(m) => ConnKind::Single(m.clone()),
            None => {
                let mut slot = self.cluster.lock().await;
                if slot.is_none() {
                    let client = redis::cluster::ClusterClient::builder(self.cfg.urls())
                        .connection_timeout(Duration::from_millis(self.cfg.connect_timeout_ms))
                        .response_timeout(
                            self.response_timeout.unwrap_or(Duration::from_millis(self.cfg.op_timeout_ms)),
                        )
                        .retries(2)
                        .min_retry_wait(20)
                        .max_retry_wait(200)
                        .build()
                        .map_err(|e| StoreError(format!("redis cluster {}: {e}", self.cfg.url)))?;
                    let c = tokio::time::timeout(
                        Duration::from_millis(self.cfg.connect_timeout_ms.saturating_mul(2)),
                        client.get_async_connection(),
                    )
                    .await
                    .map_err(|_| StoreError(format!("redis cluster {}: connect timed out", self.cfg.url)))?
                    .map_err(|e| StoreError(format!("redis cluster {}: {e}", self.cfg.url)))?;
                    *slot = Some(c);
                }
                match slot.as_ref() {
                    Some(c) => ConnKind::Cluster(c.clone()),
                    None => return Err(StoreError("redis cluster: no connection".into())),
                }
            }
        };
        Ok(Conn { inner, round_trips: self.round_trips.clone(), twice: self.twice.clone() })
    }
}

fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn sha_hex(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    data_encoding::HEXLOWER.encode(&h.finalize())
}

/// Creation with an `Idempotency-Key` (the warm path creates without a script).
/// KEYS: record, received set, idempotency key. ARGV: the fixed fields (`c`), expire at, confirm by, now, the
/// `received` bound of the shard, execution id, fingerprint, the prefix of record keys.
/// Reply: `{'new'}`, `{'full'}`, `{'conflict'}`, `{'existing', <HGETALL of the existing execution>}`.
const CREATE_LUA: &str = r"
local v = redis.call('GET', KEYS[3])
if v then
  local sep = string.find(v, '\n', 1, true)
  if sep then
    local id = string.sub(v, 1, sep - 1)
    if string.sub(v, sep + 1) ~= ARGV[7] then return {'conflict'} end
    local existing = redis.call('HGETALL', ARGV[8] .. id)
    if #existing > 0 then return {'existing', existing} end
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return {'full'} end
redis.call('HSET', KEYS[1], 'c', ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[6])
redis.call('PEXPIREAT', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], ARGV[6] .. '\n' .. ARGV[7], 'PXAT', ARGV[2])
return {'new'}
";

/// A worker's start (`Transition::Start`): only of an accepted execution that has not ended, and, unless `rerun`, not
/// started yet. KEYS: record. ARGV: now, rerun ('1' or '0').
/// Reply: the number of recorded starts after this one; 0 when refused; -1 when the execution does not exist.
const START_LUA: &str = r"
if redis.call('HEXISTS', KEYS[1], 'c') == 0 then return -1 end
local f = redis.call('HMGET', KEYS[1], 'a', 't', 'n')
if not f[1] or f[1] == '-' or f[2] then return 0 end
if ARGV[2] ~= '1' and f[3] and tonumber(f[3]) > 0 then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[1])
return redis.call('HINCRBY', KEYS[1], 'n', 1)
";

/// NEGOTIATE under LIM-4. KEYS: the sender's negotiations (sorted set by expiry); on a single Redis also the
/// negotiation's key. ARGV: id, expires at, now, the sender's quota, the record (JSON), the prefix of negotiation keys.
/// Reply: the id of the sender's own negotiation it replaced, or ''.
const NEGOTIATE_LUA: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
local replaced = ''
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  local old = redis.call('ZPOPMIN', KEYS[1])
  replaced = old[1]
  if KEYS[2] then redis.call('DEL', ARGV[6] .. replaced) end
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
if KEYS[2] then redis.call('SET', KEYS[2], ARGV[5], 'PXAT', ARGV[2]) end
return replaced
";

/// A member of a sender's share under LIM-5: a replay nonce (KEYS: the signer's nonces, digest -> until) or an
/// execution waiting for CONFIRM (KEYS: the sender's, execution id -> confirm by). ARGV: member, until, now, the
/// sender's quota. Reply: 1 remembered, 0 already held (a replay), -1 refused (the sender holds its quota).
const SHARE_LUA: &str = r"
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) > tonumber(ARGV[3]) then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return -1 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
";

const GROUP: &str = "workers";

/// Waiters for terminal signals, by execution id, and the ids whose terminal signal came lately.
///
/// A signal is remembered because it may come before anyone waits for it: an execution confirmed here and run by a
/// fast worker of another process can be terminal (and its signal delivered) before the CONFIRM that accepted it
/// starts waiting ([`Store::terminal_signal`]). A waiter registers (and enables its wake-up), then looks for the
/// mark; [`Waiters::wake`] marks the id under the lock that look takes, then notifies: every signal is either seen
/// as a mark or wakes the waiter.
///
/// This process's own terminal writes publish too, and the subscriber may hear the message before the write's reply
/// has made the record known here as final: a waiter woken then would read the record from Redis for nothing. So while a
/// terminal write of an id is in flight here ([`Waiters::begin_write`]), a message for that id is held
/// ([`Waiters::signal`]) and delivered when the write ends ([`WriteGuard`]): at once after the record is known as final
/// when the write was applied, or anyway if the write failed or lost (the message may be another process's).
#[derive(Default)]
struct Waiters {
    inner: Mutex<WaitersInner>,
}

#[derive(Default)]
struct WaitersInner {
    map: HashMap<String, Weak<Notify>>,
    /// Ids whose terminal signal came, the oldest first: at most [`RECENT_SIGNALS`].
    fired: std::collections::HashSet<Arc<str>>,
    fired_order: std::collections::VecDeque<Arc<str>>,
    /// Terminal writes in flight here, by id: how many, and whether a message for the id was held meanwhile.
    writing: HashMap<String, (u32, bool)>,
}

/// A terminal write in flight ([`Waiters::begin_write`]); ends when dropped (also when the write's future is dropped
/// half-way): wakes the id's waiters if the write was applied (`applied`, set once the record is known as final) or a
/// message for the id was held meanwhile.
struct WriteGuard<'a> {
    waiters: &'a Waiters,
    id: String,
    applied: bool,
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        let held = {
            let mut g = self.waiters.lock();
            match g.writing.get_mut(&self.id) {
                Some((n, held)) => {
                    let held = *held;
                    *n -= 1;
                    if *n == 0 {
                        g.writing.remove(&self.id);
                    }
                    held
                }
                None => false,
            }
        };
        if self.applied || held {
            self.waiters.wake(&self.id);
        }
    }
}

/// Terminal signals remembered at most (one id each; at a thousand executions a second, the last 16 seconds).
const RECENT_SIGNALS: usize = 16_384;

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, WaitersInner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn register(&self, id: &str) -> Arc<Notify> {
        let mut g = self.lock();
        if let Some(n) = g.map.get(id).and_then(Weak::upgrade) {
            return n;
        }
        if g.map.len() > 1024 && g.map.len().is_power_of_two() {
            g.map.retain(|_, w| w.strong_count() > 0);
        }
        let n = Arc::new(Notify::new());
        g.map.insert(id.to_owned(), Arc::downgrade(&n));
        n
    }

    /// Whether a terminal signal for `id` came lately.
    fn fired(&self, id: &str) -> bool {
        self.lock().fired.contains(id)
    }

    /// Wakes every waiter, signalled or not: after the subscription was made again, a signal may have been missed
    /// while it was down, so each waiter reads its record ([`Store::terminal_signal`]).
    fn wake_all(&self) {
        let all: Vec<Arc<Notify>> = self.lock().map.values().filter_map(Weak::upgrade).collect();
        for n in all {
            n.notify_waiters();
        }
    }

    /// Marks a terminal write of `id` in flight until the guard is dropped.
    fn begin_write(&self, id: &str) -> WriteGuard<'_> {
        self.lock().writing.entry(id.to_owned()).or_insert((0, false)).0 += 1;
        WriteGuard { waiters: self, id: id.to_owned(), applied: false }
    }

    /// A terminal signal from the subscriber: held while a terminal write of the id is in flight here, else
    /// [`Waiters::wake`].
    fn signal(&self, id: &str) {
        if let Some((_, held)) = self.lock().writing.get_mut(id) {
            *held = true;
            return;
        }
        self.wake(id);
    }

    fn wake(&self, id: &str) {
        let n = {
            let mut g = self.lock();
            if !g.fired.contains(id) {
                let key: Arc<str> = Arc::from(id);
                g.fired.insert(key.clone());
                g.fired_order.push_back(key);
                while g.fired_order.len() > RECENT_SIGNALS {
                    if let Some(old) = g.fired_order.pop_front() {
                        g.fired.remove(&old);
                    }
                }
            }
            let n = g.map.get(id).and_then(Weak::upgrade);
            if n.is_none() {
                g.map.remove(id);
            }
            n
        };
        if let Some(n) = n {
            n.notify_waiters();
        }
    }
}

/// Claims of one queue partition: when work was last taken over.
struct Partition {
    shards: Vec<u16>,
    reader: Connector,
    last_reclaim: tokio::sync::Mutex<Option<Instant>>,
    reclaims: AtomicU64,
}

/// The Redis store. Cheap to share (`Arc`); every method has a deadline.
pub struct RedisStore {
    cfg: RedisConfig,
    scope: AgentScope,
    ns: String,
    /// The hash tag of each shard, `{<prefix>:<ns>:<k>}`.
    tags: Vec<String>,
    conn: Connector,
    partitions: Vec<Partition>,
    consumer: String,
    capabilities: Mutex<Vec<String>>,
    create: Script,
    start: Script,
    negotiate: Script,
    share: Script,
    /// `max_negotiations_per_sender`, `max_nonces_per_sender` and `max_received_per_sender` (LIM-4, LIM-5).
    quota_negotiations: AtomicU64,
    quota_nonces: AtomicU64,
    quota_received: AtomicU64,
    /// Tokens of this process's CONFIRMs (marks the work each queues as its execution's own): a random prefix and a
    /// counter.
    token_prefix: String,
    tokens: AtomicU64,
    waiters: Arc<Waiters>,
    negotiations: moka::sync::Cache<String, NegotiationRecord>,
    /// What this process knows of executions without reading them ([`local`]): the record it created and has not
    /// changed since (CONFIRM checks its transition on it, [`Store::get_execution_for_update`]), the last non-terminal
    /// record it wrote while nothing else here saw a change of it (where a long-poll starts waiting,
    /// [`Store::get_execution_for_wait`]), and the terminal records it wrote or read: final (ST-2), so a read of one
    /// needs no round trip. Weighed by a rough size of the record (`layout::weight`): at most [`LOCAL_BYTES`], none
    /// older than [`LOCAL_TTL`].
    local: Local,
    round_trips: Arc<AtomicU64>,
    twice: Arc<AtomicBool>,
    _subscriber: tokio_util::sync::DropGuard,
}

/// How long a long-poll waits for a pub/sub wake-up before it reads the record again anyway (a wake-up lost while
/// the subscription reconnects is then late by at most this).
const SAFETY_REREAD: Duration = Duration::from_secs(5);

/// How long a terminal-signal waiter whose read of its record failed waits before it reads again.
const REREAD_AFTER_ERROR: Duration = Duration::from_millis(200);

/// How long a long-poll first waits for a wake-up before it reads the record again (see `wait_change`).
const FIRST_SLICE: Duration = Duration::from_millis(50);

/// Bytes of records known here (`RedisStore::local`) at most (rough size).
const LOCAL_BYTES: u64 = 96 * 1024 * 1024;

/// How long a record stays known here: it becomes known when created here, read, or written terminal here.
const LOCAL_TTL: Duration = Duration::from_secs(60);

impl RedisStore {
    /// Connects (lazily: a Redis that is down makes operations fail with [`StoreError`] until it is up) and starts the
    /// pub/sub subscriber. Must be called inside a Tokio runtime.
    pub fn connect(cfg: RedisConfig, scope: AgentScope) -> Result<Arc<Self>, StoreError> {
        cfg.validate().map_err(StoreError)?;
        let round_trips = Arc::new(AtomicU64::new(0));
        let op = Duration::from_millis(cfg.op_timeout_ms);
        let twice = Arc::new(AtomicBool::new(false));
        let conn = Connector::new(&cfg, round_trips.clone(), twice.clone(), None)?;
        let blocking = crate::store::CLAIM_WAIT + op;
        let partitions: Vec<Partition> = if cfg.cluster {
            (0..cfg.shards)
                .map(|k| {
                    Ok(Partition {
                        shards: vec![k],
                        reader: Connector::new(&cfg, round_trips.clone(), twice.clone(), Some(blocking))?,
                        last_reclaim: tokio::sync::Mutex::new(None),
                        reclaims: AtomicU64::new(0),
                    })
                })
                .collect::<Result<_, StoreError>>()?
        } else {
            vec![Partition {
                shards: (0..cfg.shards).collect(),
                reader: Connector::new(&cfg, round_trips.clone(), twice.clone(), Some(blocking))?,
                last_reclaim: tokio::sync::Mutex::new(None),
                reclaims: AtomicU64::new(0),
            }]
        };
        let ns = sha_hex(&[&scope.did])[..16].to_owned();
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).map_err(|e| StoreError(format!("no randomness: {e}")))?;
        let token_prefix = data_encoding::HEXLOWER.encode(&suffix);
        let consumer = format!("{}-{token_prefix}", std::process::id());
        let waiters = Arc::new(Waiters::default());
        let stop = tokio_util::sync::CancellationToken::new();
        let channels = (0..cfg.shards).map(|k| format!("{{{}:{ns}:{k}}}:done", cfg.key_prefix)).collect();
        let (woken, all) = (waiters.clone(), waiters.clone());
        tokio::spawn(subscribe(
            cfg.clone(),
            channels,
            stop.clone(),
            move || all.wake_all(),
            move |id| woken.signal(&id),
        ));
        let tags = (0..cfg.shards).map(|k| format!("{{{}:{ns}:{k}}}", cfg.key_prefix)).collect();
        Ok(Arc::new(RedisStore {
            tags,
            ns,
            conn,
            partitions,
            consumer,
            capabilities: Mutex::new(Vec::new()),
            create: Script::new(CREATE_LUA),
            start: Script::new(START_LUA),
            negotiate: Script::new(NEGOTIATE_LUA),
            share: Script::new(SHARE_LUA),
            quota_negotiations: AtomicU64::new(crate::Limits::default().max_negotiations_per_sender as u64),
            quota_nonces: AtomicU64::new(crate::Limits::default().max_nonces_per_sender as u64),
            quota_received: AtomicU64::new(crate::Limits::default().max_received_per_sender as u64),
            token_prefix,
            tokens: AtomicU64::new(0),
            waiters,
            negotiations: moka::sync::Cache::builder().max_capacity(10_000).build(),
            local: Local::new(LOCAL_BYTES, LOCAL_TTL),
            round_trips,
            twice,
            _subscriber: stop.drop_guard(),
            cfg,
            scope,
        }))
    }

    /// Sets the per-sender bounds this store keeps (LIM-4, LIM-5): negotiations kept per sender (past it a sender's
    /// new negotiation replaces its own closest to expiry), replay nonces kept per signer (past it a signed request
    /// is refused) and executions waiting for CONFIRM per sender (past it EXECUTE is refused). Defaults: those of
    /// [`crate::Limits`].
    pub fn set_sender_quotas(&self, negotiations: usize, nonces: usize, received: usize) {
        self.quota_negotiations.store(negotiations.max(1) as u64, Ordering::Relaxed);
        self.quota_nonces.store(nonces.max(1) as u64, Ordering::Relaxed);
        self.quota_received.store(received.max(1) as u64, Ordering::Relaxed);
    }

    /// The key of one of a sender's sorted sets (`n` negotiations, `j` nonces, `r` executions waiting for CONFIRM),
    /// in the sender's own hash tag.
    fn sender_key(&self, sender: &str, what: &str) -> String {
        format!("{{{}:{}:s:{}}}:{what}", self.cfg.key_prefix, self.ns, &sha_hex(&[sender])[..32])
    }

    /// Round trips to Redis made so far (pipelines and scripts count one), for benchmarks.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Test hook: while `on`, every transaction (`MULTI`/`EXEC`) is sent twice and answered with the second reply,
    /// as the cluster client does with a request whose connection dropped or whose response timeout passed after Redis
    /// ran it (see "Requests sent again" in the module docs). Not for production use.
    #[doc(hidden)]
    pub fn send_transactions_twice(&self, on: bool) {
        self.twice.store(on, Ordering::Relaxed);
    }

    /// This process's consumer name in the work streams.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.cfg.key_prefix
    }

    /// Runs a script invocation with this store's deadline (also used by the gateway for its shared routing state).
    pub async fn invoke<T: redis::FromRedisValue + Send>(
        &self,
        what: &str,
        inv: redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        self.run(what, move |mut c| async move { inv.invoke_async(&mut c).await }).await
    }

    /// Runs one command with this store's deadline (also used by the gateway for its shared routing state).
    pub async fn command<T: redis::FromRedisValue + Send>(&self, what: &str, cmd: Cmd) -> Result<T, StoreError> {
        self.run(what, move |mut c| async move { cmd.query_async(&mut c).await }).await
    }

    /// Runs a pipeline (one round trip) with this store's deadline.
    pub async fn pipeline(&self, what: &str, p: Pipeline) -> Result<(), StoreError> {
        self.run(what, move |mut c| async move { p.query_async::<()>(&mut c).await }).await
    }

    fn op(&self) -> Duration {
        Duration::from_millis(self.cfg.op_timeout_ms)
    }

    async fn run<T, F, Fut>(&self, what: &str, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let fut = async {
            let c = self.conn.get().await?;
            f(c).await.map_err(|e| StoreError(format!("redis {what}: {e}")))
        };
        match tokio::time::timeout(self.op(), fut).await {
            Ok(r) => r,
            Err(_) => Err(StoreError(format!("redis {what}: no answer within {} ms", self.cfg.op_timeout_ms))),
        }
    }

    fn shard_of(&self, id: &str) -> u16 {
        (fnv1a(id) % u64::from(self.cfg.shards)) as u16
    }

    fn claim_shard(&self, c: &IdempotencyClaim) -> u16 {
        (fnv1a(&format!("{}\n{}", c.sender, c.key)) % u64::from(self.cfg.shards)) as u16
    }

    fn tag(&self, shard: u16) -> &str {
        self.tags.get(usize::from(shard)).map_or("", String::as_str)
    }

    /// The hash tag of an execution's keys (`{<prefix>:<ns>:<k>}`), for state kept beside it in the same slot (the
    /// event log of a streamed execution, `crate::streaming::redis`).
    pub fn execution_tag(&self, execution_id: &str) -> String {
        self.tag(self.shard_of(execution_id)).to_owned()
    }

    fn exec_key(&self, id: &str) -> String {
        format!("{}:x:{id}", self.tag(self.shard_of(id)))
    }

    fn idem_key(&self, shard: u16, sender: &str, key: &str) -> String {
        format!("{}:i:{}", self.tag(shard), sha_hex(&[sender, key]))
    }

    fn stream_key(&self, shard: u16, capability: &str) -> String {
        format!("{}:q:{capability}", self.tag(shard))
    }

    fn channel(&self, shard: u16) -> String {
        format!("{}:done", self.tag(shard))
    }

    fn received_key(&self, shard: u16) -> String {
        format!("{}:received", self.tag(shard))
    }

    fn retention_ms(&self) -> u64 {
        self.scope.retention.as_millis() as u64
    }

    /// A token unique to one CONFIRM (see `layout`).
    fn next_token(&self) -> String {
        format!("{}.{:x}", self.token_prefix, self.tokens.fetch_add(1, Ordering::Relaxed))
    }

    /// The execution an `HGETALL` reply holds (`None`: no such execution).
    fn decode(&self, v: &Value) -> Result<Option<Stored>, StoreError> {
        let mut f = Fields::default();
        match v {
            Value::Array(items) => {
                for pair in items.chunks_exact(2) {
                    if let (Some(k), Some(val)) = (bytes(&pair[0]), bytes(&pair[1])) {
                        f.set(k, val);
                    }
                }
            }
            Value::Map(items) => {
                for (k, val) in items {
                    if let (Some(k), Some(val)) = (bytes(k), bytes(val)) {
                        f.set(k, val);
                    }
                }
            }
            Value::Nil => return Ok(None),
            other => return Err(StoreError(format!("redis: unexpected reply to HGETALL: {other:?}"))),
        }
        layout::assemble(&f, self.retention_ms())
    }

    /// Reads an execution from Redis (no cache); a terminal record read is kept as final.
    async fn read(&self, id: &str) -> Result<Option<Stored>, StoreError> {
        let key = self.exec_key(id);
        let v: Value = self
            .run("get execution", move |mut c| async move { redis::cmd("HGETALL").arg(&key).query_async(&mut c).await })
            .await?;
        let stored = self.decode(&v)?;
        if let Some(s) = stored.as_ref().filter(|s| s.rec.status.is_terminal()) {
            self.local.put(Arc::new(s.rec.clone()), Known::Final, layout::weight(&s.rec));
        }
        Ok(stored)
    }

    /// EXECUTE without an `Idempotency-Key`: one transaction adds the execution to `received`, counts it and writes
    /// the fixed fields. Over the shard's bound, it drops the entries whose confirm window elapsed and counts again;
    /// still over, it removes what it added and answers [`Created::Full`].
    async fn create_plain(
        &self,
        rec: &ExecutionRecord,
        key: String,
        received: String,
        fixed: String,
        per_shard: usize,
    ) -> Result<Created, StoreError> {
        let mut p = redis::pipe();
        p.atomic();
        p.cmd("ZADD").arg(&received).arg(rec.confirm_by_ms).arg(&rec.id).ignore();
        p.cmd("ZCARD").arg(&received);
        p.cmd("PEXPIREAT").arg(&received).arg(rec.retain_until_ms).ignore();
        p.cmd("HSET").arg(&key).arg(layout::FIXED).arg(fixed).ignore();
        p.cmd("PEXPIREAT").arg(&key).arg(rec.retain_until_ms).ignore();
        let recv = received.clone();
        let (waiting,): (usize,) = self.run("create", move |mut c| async move { p.query_async(&mut c).await }).await?;
        if waiting <= per_shard {
            return Ok(Created::New);
        }
        let now = now_ms();
        let (waiting,): (usize,) = self
            .run("create", move |mut c| async move {
                redis::pipe()
                    .atomic()
                    .cmd("ZREMRANGEBYSCORE")
                    .arg(&recv)
                    .arg("-inf")
                    .arg(now)
                    .ignore()
                    .cmd("ZCARD")
                    .arg(&recv)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        if waiting <= per_shard {
            return Ok(Created::New);
        }
        let id = rec.id.clone();
        self.run("create", move |mut c| async move {
            redis::pipe()
                .atomic()
                .cmd("ZREM")
                .arg(&received)
                .arg(&id)
                .ignore()
                .cmd("DEL")
                .arg(&key)
                .ignore()
                .query_async::<()>(&mut c)
                .await
        })
        .await?;
        Ok(Created::Full)
    }

    /// The creation in the execution's shard: with an `Idempotency-Key` the creation script, without one
    /// [`RedisStore::create_plain`].
    async fn create_in_shard(
        &self,
        rec: &ExecutionRecord,
        idempotency: Option<&IdempotencyClaim>,
        key: String,
        received: String,
        fixed: String,
        per_shard: usize,
    ) -> Result<Created, StoreError> {
        let shard = self.shard_of(&rec.id);
        Ok(match idempotency {
            Some(c) => {
                if self.claim_shard(c) != shard {
                    return Err(StoreError("the execution id does not fit its idempotency claim's shard".into()));
                }
                let mut inv = self.create.prepare_invoke();
                inv.key(&key)
                    .key(&received)
                    .key(self.idem_key(shard, &c.sender, &c.key))
                    .arg(fixed)
                    .arg(rec.retain_until_ms)
                    .arg(rec.confirm_by_ms)
                    .arg(now_ms())
                    .arg(per_shard)
                    .arg(&rec.id)
                    .arg(&c.fingerprint)
                    .arg(format!("{}:x:", self.tag(shard)));
                let reply: Vec<Value> =
                    self.run("create", move |mut c| async move { inv.invoke_async(&mut c).await }).await?;
                match reply.first().and_then(bytes) {
                    Some(b"new") => Created::New,
                    Some(b"existing") => match reply.get(1).map(|v| self.decode(v)).transpose()?.flatten() {
                        Some(s) => Created::Existing(Box::new(s.rec)),
                        None => return Err(StoreError("redis create: the existing execution is gone".into())),
                    },
                    Some(b"conflict") => Created::Conflict,
                    Some(b"full") => Created::Full,
                    _ => return Err(StoreError(format!("redis create: unexpected reply {reply:?}"))),
                }
            }
            None => self.create_plain(rec, key, received, fixed, per_shard).await?,
        })
    }

    /// LIM-5: counts the new execution into its sender's executions waiting for CONFIRM (the share script on the
    /// sender's own key); `false` when the sender holds `max_received_per_sender` of them already.
    async fn join_share(&self, rec: &ExecutionRecord) -> Result<bool, StoreError> {
        let mut inv = self.share.prepare_invoke();
        inv.key(self.sender_key(&rec.sender, "r"))
            .arg(&rec.id)
            .arg(rec.confirm_by_ms.max(1))
            .arg(now_ms())
            .arg(self.quota_received.load(Ordering::Relaxed));
        let r: i64 = self.run("join share", move |mut c| async move { inv.invoke_async(&mut c).await }).await?;
        Ok(r >= 0)
    }

    /// Removes an execution from its sender's executions waiting for CONFIRM (LIM-5), as its own request (the
    /// sender's key is in another slot than the execution's shard).
    async fn leave_share(&self, rec: &ExecutionRecord, what: &str) -> Result<(), StoreError> {
        let (key, id) = (self.sender_key(&rec.sender, "r"), rec.id.clone());
        self.run(
            what,
            move |mut c| async move { redis::cmd("ZREM").arg(&key).arg(&id).query_async::<()>(&mut c).await },
        )
        .await
    }

    /// Runs `tx`, a transaction that takes `rec` out of `received`; on a cluster (where the sender's share is in
    /// another slot, so that the transaction cannot hold it) with `leave`, the share's `ZREM` is sent beside it.
    async fn leaving_share<T>(
        &self,
        rec: &ExecutionRecord,
        leave: bool,
        tx: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        if !(leave && self.cfg.cluster) {
            return tx.await;
        }
        let (out, left) = tokio::join!(tx, self.leave_share(rec, "leave share"));
        let out = out?;
        left?;
        Ok(out)
    }

    /// Undoes a creation that must not stand (refused by the sender's share): the execution, its place in the
    /// shard's `received` and its `Idempotency-Key`.
    async fn undo_create(
        &self,
        rec: &ExecutionRecord,
        idempotency: Option<&IdempotencyClaim>,
        key: String,
        received: String,
    ) -> Result<(), StoreError> {
        let mut p = redis::pipe();
        p.atomic();
        p.cmd("ZREM").arg(&received).arg(&rec.id).ignore();
        p.cmd("DEL").arg(&key).ignore();
        if let Some(c) = idempotency {
            p.cmd("DEL").arg(self.idem_key(self.shard_of(&rec.id), &c.sender, &c.key)).ignore();
        }
        self.run("undo create", move |mut c| async move { p.query_async::<()>(&mut c).await }).await
    }

    /// The outcome of a write that a guard refused: the record as stored.
    async fn refused(&self, id: &str) -> Result<TransitionOutcome, StoreError> {
        Ok(match self.read(id).await? {
            Some(s) => TransitionOutcome::Refused(Box::new(s.rec)),
            None => TransitionOutcome::NotFound,
        })
    }

    /// Applies `t`: checks it against `seen` (or the stored record) with [`ExecutionRecord::apply`], then writes the
    /// stage's fields with the native guard that refuses it if the stored state moved on meanwhile (see the module
    /// docs). With `claim`, an applied `Accept` also claims work for this process (see [`Store::accept_and_claim`]);
    /// with `release`, a terminal write releases that work.
    async fn apply(
        &self,
        id: &str,
        t: &Transition,
        seen: Option<&ExecutionRecord>,
        release: Option<&WorkItem>,
        claim: bool,
    ) -> Result<(TransitionOutcome, Option<WorkItem>), StoreError> {
        let retention = self.retention_ms();
        let mut fresh = seen.is_none();
        let mut cur: Cow<'_, ExecutionRecord> = match seen {
            Some(r) => Cow::Borrowed(r),
            None => match self.get_execution(id).await? {
                Some(r) => Cow::Owned(r),
                None => {
                    if let Some(item) = release {
                        self.release(item).await?;
                    }
                    return Ok((TransitionOutcome::NotFound, None));
                }
            },
        };
        let next = loop {
            let mut next = cur.as_ref().clone();
            if next.apply(t, retention) {
                break next;
            }
            if !fresh {
                // `seen` may be stale: decide on the stored record.
                fresh = true;
                match self.get_execution(id).await? {
                    Some(r) => {
                        cur = Cow::Owned(r);
                        continue;
                    }
                    None => return Ok((TransitionOutcome::NotFound, None)),
                }
            }
            if let Some(item) = release.filter(|_| cur.status.is_terminal()) {
                self.release(item).await?;
            }
            return Ok((TransitionOutcome::Refused(Box::new(cur.into_owned())), None));
        };
        match t {
            Transition::Accept { now_ms, sender_verified, traceparent } => {
                self.write_accept(next, *now_ms, *sender_verified, traceparent.as_deref(), claim).await
            }
            Transition::Start { now_ms, rerun } => Ok((self.write_start(next, *now_ms, *rerun).await?, None)),
            Transition::Finish { .. } | Transition::Ran { .. } => {
                let ran = matches!(t, Transition::Ran { .. });
                Ok((self.write_end(cur.status, next, ran, release).await?, None))
            }
        }
    }

    /// CONFIRM's transaction: `HSETNX a` (the first CONFIRM wins), the expiry, `ZREM` from `received`, `XADD` of the
    /// work with this CONFIRM's token and, with `claim`, `XREADGROUP` of the oldest unclaimed work for this process.
    async fn write_accept(
        &self,
        next: ExecutionRecord,
        now: u64,
        sender_verified: bool,
        traceparent: Option<&str>,
        claim: bool,
    ) -> Result<(TransitionOutcome, Option<WorkItem>), StoreError> {
        let shard = self.shard_of(&next.id);
        let key = self.exec_key(&next.id);
        let stream = self.stream_key(shard, &next.capability);
        let token = self.next_token();
        let mut p = redis::pipe();
        p.atomic().ignore_errors();
        p.cmd("HSETNX").arg(&key).arg(layout::ACCEPT).arg(layout::accept_value(
            &token,
            now,
            sender_verified,
            traceparent,
        ));
        p.cmd("HEXISTS").arg(&key).arg(layout::FIXED);
        p.cmd("PEXPIREAT").arg(&key).arg(next.retain_until_ms);
        p.cmd("ZREM").arg(self.received_key(shard)).arg(&next.id);
        if !self.cfg.cluster {
            p.cmd("ZREM").arg(self.sender_key(&next.sender, "r")).arg(&next.id);
        }
        if let Some(k) = &next.idempotency_key {
            p.cmd("PEXPIREAT").arg(self.idem_key(shard, &next.sender, k)).arg(next.retain_until_ms);
        }
        let at = p.len();
        p.cmd("XADD")
            .arg(&stream)
            .arg("MAXLEN")
            .arg("~")
            .arg(self.cfg.max_queue_len)
            .arg("*")
            .arg("id")
            .arg(&next.id)
            .arg("tok")
            .arg(&token);
        if claim {
            p.cmd("XREADGROUP")
                .arg("GROUP")
                .arg(GROUP)
                .arg(&self.consumer)
                .arg("COUNT")
                .arg(1)
                .arg("STREAMS")
                .arg(&stream)
                .arg(">");
        }
        let tx = self.run("accept", move |mut c| async move { p.query_async(&mut c).await });
        let mut reply: Vec<Value> = self.leaving_share(&next, true, tx).await?;
        let applied = int_at(&reply, 0)? == 1;
        let exists = int_at(&reply, 1)? == 1;
        let added = match reply.get(at).and_then(bytes).and_then(|b| std::str::from_utf8(b).ok()) {
            Some(a) => a.to_owned(),
            None => return Err(StoreError(format!("redis accept: the work was not queued: {:?}", reply.get(at)))),
        };
        // No group yet (a Redis that lost it): the reply is an error; the workers re-create the group and take the
        // work from there.
        let claimed =
            reply.get_mut(at + 1).map(std::mem::take).filter(|v| matches!(v, Value::Array(_) | Value::Map(_)));
        // Usually the work just queued: then only its id is looked at.
        let own = claimed.as_ref().and_then(first_entry_id) == Some(added.as_bytes());
        let entry = |v: Value| {
            let reply = redis::from_redis_value::<StreamReadReply>(v).ok()?;
            reply.keys.into_iter().next()?.ids.into_iter().next()
        };
        if !exists {
            self.local.forget(&next.id);
            // The execution expired: delete what the transaction left of it, and the work just queued.
            let mut p = redis::pipe();
            p.cmd("XACK").arg(&stream).arg(GROUP).arg(&added).ignore();
            p.cmd("XDEL").arg(&stream).arg(&added).ignore();
            p.cmd("DEL").arg(&key).ignore();
            self.run("accept refused", move |mut c| async move { p.query_async::<()>(&mut c).await }).await?;
            let item = self.check_one(&stream, claimed.filter(|_| !own).and_then(entry)).await;
            return Ok((TransitionOutcome::NotFound, item));
        }
        if !applied {
            self.local.forget(&next.id);
            let stored = self.read(&next.id).await?;
            if let Some(s) = stored.as_ref().filter(|s| s.token.as_deref() == Some(token.as_str())) {
                // Accepted with this CONFIRM's token: by an earlier run of this very transaction, whose reply was
                // lost (the cluster client sent it again, see "Requests sent again"). It is applied. This run queued
                // the work a second time, with the same token: what it claimed is checked as a worker checks claimed
                // work, so that only one of the entries runs.
                let rec = s.rec.clone();
                if !rec.status.is_terminal() {
                    self.local.put(Arc::new(rec.clone()), Known::Written, layout::weight(&rec));
                }
                let item = self.check_one(&stream, claimed.and_then(entry)).await;
                return Ok((TransitionOutcome::Applied(Box::new(rec)), item));
            }
            // Another CONFIRM or a cancel came first: the work just queued is not the execution's: delete it (a worker
            // that got it first drops it, its token not being the execution's).
            let mut p = redis::pipe();
            p.cmd("XACK").arg(&stream).arg(GROUP).arg(&added).ignore();
            p.cmd("XDEL").arg(&stream).arg(&added).ignore();
            self.run("accept refused", move |mut c| async move { p.query_async::<()>(&mut c).await }).await?;
            let item = self.check_one(&stream, claimed.filter(|_| !own).and_then(entry)).await;
            let outcome = match stored {
                Some(s) => TransitionOutcome::Refused(Box::new(s.rec)),
                None => TransitionOutcome::NotFound,
            };
            return Ok((outcome, item));
        }
        self.local.put(Arc::new(next.clone()), Known::Written, layout::weight(&next));
        let item = if own {
            Some(WorkItem {
                execution_id: next.id.clone(),
                capability: next.capability.clone(),
                deliveries: 1,
                snapshot: Some(next.clone()),
                receipt: added,
            })
        } else {
            self.check_one(&stream, claimed.and_then(entry)).await
        };
        Ok((TransitionOutcome::Applied(Box::new(next)), item))
    }

    /// A worker's start: the start script (see `START_LUA`).
    async fn write_start(
        &self,
        mut next: ExecutionRecord,
        now: u64,
        rerun: bool,
    ) -> Result<TransitionOutcome, StoreError> {
        let mut inv = self.start.prepare_invoke();
        inv.key(self.exec_key(&next.id)).arg(now).arg(if rerun { "1" } else { "0" });
        let starts: i64 = self.run("start", move |mut c| async move { inv.invoke_async(&mut c).await }).await?;
        if starts <= 0 {
            self.local.forget(&next.id);
            return if starts == 0 { self.refused(&next.id).await } else { Ok(TransitionOutcome::NotFound) };
        }
        next.attempts = u32::try_from(starts).unwrap_or(u32::MAX);
        next.rev = layout::revision(&next);
        self.local.put(Arc::new(next.clone()), Known::Written, layout::weight(&next));
        Ok(TransitionOutcome::Applied(Box::new(next)))
    }

    /// The end's transaction: `HSETNX t` (the first terminal write wins), the expiry, for an execution still
    /// `received` (`from`) `HSETNX a -` and `ZREM`, the release of `release`, and `PUBLISH`.
    async fn write_end(
        &self,
        from: ExecutionStatus,
        mut next: ExecutionRecord,
        ran: bool,
        release: Option<&WorkItem>,
    ) -> Result<TransitionOutcome, StoreError> {
        let shard = self.shard_of(&next.id);
        let key = self.exec_key(&next.id);
        let mut p = redis::pipe();
        p.atomic().ignore_errors();
        p.cmd("HSETNX").arg(&key).arg(layout::TERMINAL).arg(layout::terminal_value(&next, ran)?);
        p.cmd("HEXISTS").arg(&key).arg(layout::FIXED);
        // What the stored record holds beside what this write sets: `next` was computed from the record this process
        // had, which may be stale (accepted or started elsewhere since).
        p.cmd("HMGET").arg(&key).arg(layout::ACCEPT).arg(layout::STARTS);
        p.cmd("PEXPIREAT").arg(&key).arg(next.retain_until_ms);
        if let Some(k) = &next.idempotency_key {
            p.cmd("PEXPIREAT").arg(self.idem_key(shard, &next.sender, k)).arg(next.retain_until_ms);
        }
        if from == ExecutionStatus::Received {
            p.cmd("HSETNX").arg(&key).arg(layout::ACCEPT).arg(layout::CLOSED);
            p.cmd("ZREM").arg(self.received_key(shard)).arg(&next.id);
            if !self.cfg.cluster {
                p.cmd("ZREM").arg(self.sender_key(&next.sender, "r")).arg(&next.id);
            }
        }
        if let Some(item) = release {
            let stream = self.stream_key(self.shard_of(&item.execution_id), &item.capability);
            p.cmd("XACK").arg(&stream).arg(GROUP).arg(&item.receipt);
            p.cmd("XDEL").arg(&stream).arg(&item.receipt);
        }
        p.cmd("PUBLISH").arg(self.channel(shard)).arg(&next.id);
        // This process's own pub/sub message is held until the record is known here as final (see `Waiters`).
        let mut guard = self.waiters.begin_write(&next.id);
        let tx = self.run("finish", move |mut c| async move { p.query_async(&mut c).await });
        let reply: Vec<Value> = self.leaving_share(&next, from == ExecutionStatus::Received, tx).await?;
        if int_at(&reply, 0)? != 1 || int_at(&reply, 1)? == 0 {
            self.local.forget(&next.id);
        }
        if int_at(&reply, 1)? == 0 {
            // The execution expired meanwhile: remove what the transaction left of it.
            let key = key.clone();
            self.run(
                "clean up",
                move |mut c| async move { redis::cmd("DEL").arg(&key).query_async::<()>(&mut c).await },
            )
            .await?;
            return Ok(TransitionOutcome::NotFound);
        }
        if int_at(&reply, 0)? != 1 {
            return self.refused(&next.id).await;
        }
        let held = match reply.get(2) {
            Some(Value::Array(v)) => (v.first().and_then(bytes), v.get(1).and_then(bytes)),
            _ => (None, None),
        };
        layout::Settled::read(held.0, held.1, ran)?.apply(&mut next);
        self.local.put(Arc::new(next.clone()), Known::Final, layout::weight(&next));
        guard.applied = true;
        drop(guard);
        Ok(TransitionOutcome::Applied(Box::new(next)))
    }

    /// Releases claimed work (XACK + XDEL in one round trip).
    async fn release(&self, item: &WorkItem) -> Result<(), StoreError> {
        let key = self.stream_key(self.shard_of(&item.execution_id), &item.capability);
        let entry = item.receipt.clone();
        self.run("release work", move |mut c| async move {
            redis::pipe()
                .cmd("XACK")
                .arg(&key)
                .arg(GROUP)
                .arg(&entry)
                .ignore()
                .cmd("XDEL")
                .arg(&key)
                .arg(&entry)
                .ignore()
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    fn caps(&self) -> Vec<String> {
        self.capabilities.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// [`RedisStore::check_claimed`] of one entry of `stream` that a CONFIRM claimed beside its own; an error leaves
    /// the claim to be taken over after the visibility timeout.
    async fn check_one(&self, stream: &str, entry: Option<StreamId>) -> Option<WorkItem> {
        let entry = entry?;
        match self.check_claimed(vec![(stream.to_owned(), entry, 1)]).await {
            Ok(mut items) => items.pop(),
            Err(e) => {
                tracing::warn!(error = %e, "could not check claimed work; it is taken over later");
                None
            }
        }
    }

    /// Checks work claimed from the streams (`(stream key, entry, deliveries at least)`, all of one shard) against
    /// the executions, with one pipelined `HSETNX w:<token>` and `HGETALL` per entry: returns the entries that are
    /// their execution's own work (their token is the one of the CONFIRM that accepted it, and no other entry with
    /// that token was checked first) and whose execution has not ended, with the record as the snapshot; releases the
    /// others (queued by a CONFIRM that lost, by a second run of the accepting CONFIRM's transaction, or of an
    /// execution that ended or expired).
    async fn check_claimed(&self, entries: Vec<(String, StreamId, u64)>) -> Result<Vec<WorkItem>, StoreError> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<(Option<String>, Option<String>)> =
            entries.iter().map(|(_, e, _)| (e.get::<String>("id"), e.get::<String>("tok"))).collect();
        let mut p = redis::pipe();
        for ((_, e, _), (id, token)) in entries.iter().zip(&ids) {
            let key = self.exec_key(id.as_deref().unwrap_or_default());
            // The first entry of a token checked is the one that runs (see "Requests sent again"); a take-over checks
            // the same entry again and finds it there.
            if let (Some(_), Some(token)) = (id, token) {
                p.cmd("HSETNX").arg(&key).arg(layout::work_field(token)).arg(&e.id).ignore();
            }
            p.cmd("HGETALL").arg(key);
        }
        let records: Vec<Value> =
            self.run("check claimed work", move |mut c| async move { p.query_async(&mut c).await }).await?;
        let mut out = Vec::new();
        let mut junk = redis::pipe();
        for (((stream, e, deliveries), (id, token)), v) in entries.into_iter().zip(ids).zip(records) {
            let stored = match self.decode(&v) {
                Ok(None) => {
                    // The execution expired: remove what the `HSETNX` left of it.
                    if let Some(id) = &id {
                        junk.cmd("DEL").arg(self.exec_key(id)).ignore();
                    }
                    None
                }
                Ok(s) => s,
                Err(err) => {
                    tracing::warn!(error = %err, execution_id = ?id, "claimed work of an unreadable execution; dropped");
                    None
                }
            };
            match stored {
                Some(s)
                    if id.is_some()
                        && token.is_some()
                        && s.token == token
                        && s.work.as_deref() == Some(e.id.as_str())
                        && !s.rec.status.is_terminal() =>
                {
                    let deliveries = e.delivered_count.map_or(deliveries, |d| d as u64).max(deliveries);
                    out.push(WorkItem {
                        execution_id: s.rec.id.clone(),
                        capability: s.rec.capability.clone(),
                        deliveries,
                        snapshot: Some(s.rec),
                        receipt: e.id,
                    });
                }
                _ => {
                    junk.cmd("XACK").arg(&stream).arg(GROUP).arg(&e.id).ignore();
                    junk.cmd("XDEL").arg(&stream).arg(&e.id).ignore();
                }
            }
        }
        if !junk.is_empty() {
            self.run("release work", move |mut c| async move { junk.query_async::<()>(&mut c).await }).await?;
        }
        Ok(out)
    }

    /// Takes over work idle for longer than the visibility timeout (XAUTOCLAIM), at most every half timeout.
    async fn reclaim(&self, part: &Partition, max: usize) -> Result<Vec<WorkItem>, StoreError> {
        let vis = Duration::from_millis(self.cfg.visibility_timeout_ms);
        {
            let mut last = part.last_reclaim.lock().await;
            if last.is_some_and(|l| l.elapsed() < vis / 2) {
                return Ok(Vec::new());
            }
            *last = Some(Instant::now());
        }
        let keys: Vec<String> = part
            .shards
            .iter()
            .flat_map(|s| self.caps().into_iter().map(move |c| (*s, c)))
            .map(|(s, c)| self.stream_key(s, &c))
            .collect();
        // Every tenth pass, forget consumers (processes) that are long gone and hold nothing.
        if part.reclaims.fetch_add(1, Ordering::Relaxed) % 10 == 9 {
            self.forget_dead_consumers(&keys).await?;
        }
        let mut out = Vec::new();
        for key in keys {
            if out.len() >= max {
                break;
            }
            let consumer = self.consumer.clone();
            let count = max - out.len();
            let min_idle = self.cfg.visibility_timeout_ms;
            let stream = key.clone();
            let reply: StreamAutoClaimReply = self
                .run("xautoclaim", move |mut c| async move {
                    redis::cmd("XAUTOCLAIM")
                        .arg(&stream)
                        .arg(GROUP)
                        .arg(&consumer)
                        .arg(min_idle)
                        .arg("0-0")
                        .arg("COUNT")
                        .arg(count)
                        .query_async(&mut c)
                        .await
                })
                .await?;
            if !reply.claimed.is_empty() {
                tracing::info!(taken_over = reply.claimed.len(), "took over work of a lost worker");
            }
            let entries = reply.claimed.into_iter().map(|e| (key.clone(), e, 2)).collect();
            out.extend(self.check_claimed(entries).await?);
        }
        Ok(out)
    }
}

/// Whether a non-final record known here may stand for the stored one without a read
/// ([`Store::get_execution_for_update`], [`Store::get_execution_for_wait`]): not past its retention, and not
/// `received` past its confirm window. The engine closes such a record for its window (`confirm_window_elapsed`), and
/// a transition computed from a stale `received` record applies to what is stored: had another process confirmed the
/// execution meanwhile, a RESULT or a repeated CONFIRM here would cancel an accepted, maybe running, execution.
fn usable_unread(rec: &ExecutionRecord, now: u64) -> bool {
    rec.retain_until_ms > now && !(rec.status == ExecutionStatus::Received && now >= rec.confirm_by_ms)
}

/// The bytes of a string reply.
fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// The id of the first entry of an `XREADGROUP` reply: `[[stream, [[id, fields], ...]], ...]` (RESP2) or
/// `{stream: [[id, fields], ...], ...}` (RESP3, a URL with `protocol=resp3`).
fn first_entry_id(v: &Value) -> Option<&[u8]> {
    let entries = match v {
        Value::Array(streams) => {
            let Value::Array(stream) = streams.first()? else { return None };
            stream.get(1)?
        }
        Value::Map(streams) => &streams.first()?.1,
        _ => return None,
    };
    let Value::Array(entries) = entries else { return None };
    let Value::Array(entry) = entries.first()? else { return None };
    bytes(entry.first()?)
}

/// The integer reply at `i` of a transaction.
fn int_at(reply: &[Value], i: usize) -> Result<i64, StoreError> {
    match reply.get(i) {
        Some(Value::Int(n)) => Ok(*n),
        other => Err(StoreError(format!("redis: unexpected reply in a transaction: {other:?}"))),
    }
}

impl RedisStore {
    /// Deletes consumers that hold no work and were idle for ten visibility timeouts (at least ten minutes), so that
    /// the consumer lists of the groups do not grow with every process ever started.
    async fn forget_dead_consumers(&self, keys: &[String]) -> Result<(), StoreError> {
        let idle_ms = self.cfg.visibility_timeout_ms.saturating_mul(10).max(600_000) as usize;
        for key in keys {
            let k = key.clone();
            let info: redis::streams::StreamInfoConsumersReply = self
                .run("xinfo consumers", move |mut c| async move {
                    redis::cmd("XINFO").arg("CONSUMERS").arg(&k).arg(GROUP).query_async(&mut c).await
                })
                .await?;
            for dead in info.consumers.iter().filter(|c| c.pending == 0 && c.idle > idle_ms && c.name != self.consumer)
            {
                let (k, name) = (key.clone(), dead.name.clone());
                self.run("xgroup delconsumer", move |mut c| async move {
                    redis::cmd("XGROUP")
                        .arg("DELCONSUMER")
                        .arg(&k)
                        .arg(GROUP)
                        .arg(&name)
                        .query_async::<()>(&mut c)
                        .await
                })
                .await?;
            }
        }
        Ok(())
    }
}

/// How long a subscription must have held for the next one, after it is lost, to be tried again at once.
const STEADY_SUBSCRIPTION: Duration = Duration::from_secs(2);

/// Subscribes to `channels` on the Redis of `cfg` until `stop`: `on_message` gets the payload of every message;
/// `on_subscribed` runs after every (re)subscription, so that a caller can wake whoever may have missed a message
/// while the subscription was down. A lost subscription is made again, trying the seed URLs in turn, with a backoff
/// from 100 ms doubling to 2 s (back to 100 ms once a subscription has held for 2 s). The one subscriber of the
/// agent's store and of the sessions store.
pub async fn subscribe(
    cfg: RedisConfig,
    channels: Vec<String>,
    stop: tokio_util::sync::CancellationToken,
    on_subscribed: impl Fn() + Send,
    on_message: impl Fn(String) + Send,
) {
    let urls = cfg.urls();
    let mut attempt = 0usize;
    let mut backoff = Duration::from_millis(100);
    while !stop.is_cancelled() {
        let url = urls.get(attempt % urls.len().max(1)).cloned().unwrap_or_default();
        attempt += 1;
        let connect = async {
            let client = redis::Client::open(url.as_str())?;
            let mut ps = client.get_async_pubsub().await?;
            ps.subscribe(&channels).await?;
            Ok::<_, redis::RedisError>(ps)
        };
        let ps = tokio::select! {
            () = stop.cancelled() => return,
            r = tokio::time::timeout(Duration::from_millis(cfg.connect_timeout_ms.saturating_mul(2)), connect) => r,
        };
        match ps {
            Ok(Ok(ps)) => {
                let since = Instant::now();
                on_subscribed();
                let mut stream = ps.into_on_message();
                loop {
                    let msg = tokio::select! {
                        () = stop.cancelled() => return,
                        m = stream.next() => m,
                    };
                    let Some(msg) = msg else { break };
                    on_message(msg.get_payload::<String>().unwrap_or_default());
                }
                tracing::warn!(channels = ?channels.first(), "redis subscription lost; reconnecting");
                // A subscription that held is made again quickly; one dropped at once (a flapping Redis) backs off
                // as failures do, so that its waiters are not woken to read their records ten times a second.
                if since.elapsed() >= STEADY_SUBSCRIPTION {
                    backoff = Duration::from_millis(100);
                }
            }
            Ok(Err(e)) => tracing::debug!(error = %e, channels = ?channels.first(), "redis subscription failed"),
            Err(_) => tracing::debug!(channels = ?channels.first(), "redis subscription timed out"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

fn is_busygroup(e: &redis::RedisError) -> bool {
    e.code() == Some("BUSYGROUP") || e.to_string().contains("BUSYGROUP")
}

#[async_trait::async_trait]
impl Executions for RedisStore {
    async fn put_negotiation(&self, rec: NegotiationRecord) -> Result<(), StoreError> {
        self.admit_negotiation(rec).await.map(|_| ())
    }
    async fn admit_negotiation(&self, rec: NegotiationRecord) -> Result<Admitted, StoreError> {
        let prefix = format!("{}:{}:n:", self.cfg.key_prefix, self.ns);
        let key = format!("{prefix}{}", rec.id);
        let json = serde_json::to_string(&rec).map_err(|e| StoreError(e.to_string()))?;
        let at = rec.expires_at_ms;
        let mut inv = self.negotiate.prepare_invoke();
        inv.key(self.sender_key(&rec.sender, "n"));
        // On a single Redis the script writes the record too (one round trip); a cluster's slots keep them apart.
        let together = !self.cfg.cluster;
        if together {
            inv.key(&key);
        }
        inv.arg(&rec.id)
            .arg(at)
            .arg(now_ms())
            .arg(self.quota_negotiations.load(Ordering::Relaxed))
            .arg(if together { json.as_str() } else { "" })
            .arg(&prefix);
        let replaced: String =
            self.run("admit negotiation", move |mut c| async move { inv.invoke_async(&mut c).await }).await?;
        if !together {
            let old = (!replaced.is_empty()).then(|| format!("{prefix}{replaced}"));
            self.run("set negotiation", move |mut c| async move {
                if let Some(old) = &old {
                    redis::cmd("DEL").arg(old).query_async::<()>(&mut c).await?;
                }
                redis::cmd("SET").arg(&key).arg(json).arg("PXAT").arg(at).query_async::<()>(&mut c).await
            })
            .await?;
        }
        self.negotiations.insert(rec.id.clone(), rec);
        if replaced.is_empty() {
            Ok(Admitted::Stored)
        } else {
            self.negotiations.invalidate(&replaced);
            Ok(Admitted::Replaced)
        }
    }
    async fn get_negotiation(&self, id: &str) -> Result<Option<NegotiationRecord>, StoreError> {
        let now = now_ms();
        // A negotiation never changes: one read per process at most.
        if let Some(n) = self.negotiations.get(id) {
            return Ok((n.expires_at_ms > now).then_some(n));
        }
        let key = format!("{}:{}:n:{id}", self.cfg.key_prefix, self.ns);
        let json: Option<String> = self
            .run("get negotiation", move |mut c| async move { redis::cmd("GET").arg(&key).query_async(&mut c).await })
            .await?;
        let Some(json) = json else { return Ok(None) };
        let rec: NegotiationRecord = serde_json::from_str(&json)
            .map_err(|e| StoreError(format!("a stored negotiation is not readable: {e}")))?;
        self.negotiations.insert(rec.id.clone(), rec.clone());
        Ok((rec.expires_at_ms > now).then_some(rec))
    }
    fn id_fits(&self, id: &str, claim: Option<&IdempotencyClaim>) -> bool {
        claim.is_none_or(|c| self.shard_of(id) == self.claim_shard(c))
    }
    async fn create_execution(
        &self,
        rec: ExecutionRecord,
        idempotency: Option<IdempotencyClaim>,
    ) -> Result<Created, StoreError> {
        let shard = self.shard_of(&rec.id);
        let mut rec = rec;
        rec.rev = 1;
        rec.idempotency_key = idempotency.as_ref().map(|c| c.key.clone());
        let per_shard = self.scope.max_received.div_ceil(usize::from(self.cfg.shards)).max(1);
        let fixed = layout::fixed_value(&rec)?;
        let key = self.exec_key(&rec.id);
        let received = self.received_key(shard);
        let (created, share) = tokio::join!(
            self.create_in_shard(&rec, idempotency.as_ref(), key.clone(), received.clone(), fixed, per_shard),
            self.join_share(&rec)
        );
        let admitted = match (&created, share) {
            (Ok(Created::New), Ok(admitted)) => admitted,
            (Ok(Created::New), Err(e)) => {
                // The creation without its place in the sender's share is undone.
                self.undo_create(&rec, idempotency.as_ref(), key, received).await?;
                return Err(e);
            }
            (_, share) => {
                // Not created (or failed): the id the share admitted goes again.
                if matches!(share, Ok(true)) {
                    self.leave_share(&rec, "leave share").await?;
                }
                return created;
            }
        };
        if !admitted {
            self.undo_create(&rec, idempotency.as_ref(), key, received).await?;
            let limit = self.quota_received.load(Ordering::Relaxed);
            return Ok(Created::Refused(QuotaExceeded {
                quota: "max_received_per_sender",
                limit,
                retry_after_ms: 1000,
            }));
        }
        let weight = layout::weight(&rec);
        self.local.put(Arc::new(rec), Known::Created, weight);
        Ok(Created::New)
    }
    async fn get_execution(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        if let Some(rec) = self.local.final_record(id) {
            return Ok((rec.retain_until_ms > now_ms()).then(|| (*rec).clone()));
        }
        let Some(stored) = self.read(id).await? else { return Ok(None) };
        Ok((stored.rec.retain_until_ms > now_ms()).then_some(stored.rec))
    }
    async fn transition(
        &self,
        id: &str,
        t: Transition,
        seen: Option<&ExecutionRecord>,
    ) -> Result<TransitionOutcome, StoreError> {
        Ok(self.apply(id, &t, seen, None, false).await?.0)
    }
    async fn get_execution_for_update(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        match self.local.get(id) {
            Some((rec, Known::Created)) if usable_unread(&rec, now_ms()) => Ok(Some((*rec).clone())),
            _ => self.get_execution(id).await,
        }
    }
    async fn get_execution_for_wait(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        match self.local.get(id) {
            Some((rec, known)) if known != Known::Final && usable_unread(&rec, now_ms()) => Ok(Some((*rec).clone())),
            _ => self.get_execution(id).await,
        }
    }
    async fn wait_change(
        &self,
        id: &str,
        seen: ExecutionStatus,
        timeout: Duration,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let notify = self.waiters.register(id);
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // The caller has just read the record (`seen`): a wake-up within a short first slice saves reading it again
        // before waiting; a change that slipped in between that read and this registration is caught by the read
        // after the slice.
        if let Some(rec) = self.local.final_record(id) {
            return Ok((rec.retain_until_ms > now_ms()).then(|| (*rec).clone()));
        }
        // A terminal signal already came (before this registration): the stored record is terminal.
        if self.waiters.fired(id) {
            return self.get_execution(id).await;
        }
        let first = timeout.min(FIRST_SLICE);
        if tokio::time::timeout(first, notified.as_mut()).await.is_ok() || first >= timeout {
            return self.get_execution(id).await;
        }
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let Some(rec) = self.get_execution(id).await? else { return Ok(None) };
        if rec.status != seen {
            return Ok(Some(rec));
        }
        let _ = tokio::time::timeout((timeout - first).min(SAFETY_REREAD), notified).await;
        self.get_execution(id).await
    }
    async fn terminal_signal(&self, id: &str, timeout: Duration) -> bool {
        let until = tokio::time::Instant::now() + timeout;
        let notify = self.waiters.register(id);
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // Registered first, then the marks: a signal that came before this call is not missed (see `Waiters`).
        if self.waiters.fired(id) || self.local.final_record(id).is_some() {
            return true;
        }
        loop {
            if tokio::time::timeout_at(until, notified.as_mut()).await.is_err() {
                return false;
            }
            // The next wake-up is registered before anything is looked at: one that comes during the read below (the
            // subscription lost and made again once more) is not missed.
            notified.set(notify.notified());
            notified.as_mut().enable();
            if self.waiters.fired(id) || self.local.final_record(id).is_some() {
                return true;
            }
            // Woken with no signal for `id`: the subscription was made again (`Waiters::wake_all`), and the signal
            // may have been published while it was down. The record says; a read that fails (Redis coming back) is
            // tried again shortly, within the wait's time.
            loop {
                match tokio::time::timeout_at(until, self.get_execution(id)).await {
                    Err(_) => return false,
                    Ok(Ok(rec)) => {
                        if rec.is_some_and(|r| r.status.is_terminal()) {
                            return true;
                        }
                        break;
                    }
                    Ok(Err(_)) => {
                        let next = tokio::time::Instant::now() + REREAD_AFTER_ERROR;
                        if next >= until {
                            return false;
                        }
                        tokio::time::sleep_until(next).await;
                    }
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl WorkQueue for RedisStore {
    async fn accept_and_claim(
        &self,
        id: &str,
        t: Transition,
        seen: Option<&ExecutionRecord>,
    ) -> Result<(TransitionOutcome, Option<WorkItem>), StoreError> {
        self.apply(id, &t, seen, None, true).await
    }
    fn queue_partitions(&self) -> usize {
        self.partitions.len()
    }
    async fn prepare_queue(&self, capabilities: &[String]) -> Result<(), StoreError> {
        {
            let mut caps = self.capabilities.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for c in capabilities {
                if !caps.contains(c) {
                    caps.push(c.clone());
                }
            }
        }
        let keys: Vec<String> = (0..self.cfg.shards)
            .flat_map(|s| self.caps().into_iter().map(move |c| (s, c)))
            .map(|(s, c)| self.stream_key(s, &c))
            .collect();
        let creates = keys.into_iter().map(|key| {
            self.run("create consumer group", move |mut c| async move {
                match redis::cmd("XGROUP")
                    .arg("CREATE")
                    .arg(&key)
                    .arg(GROUP)
                    .arg("0")
                    .arg("MKSTREAM")
                    .query_async::<()>(&mut c)
                    .await
                {
                    Err(e) if is_busygroup(&e) => Ok(()),
                    r => r,
                }
            })
        });
        for r in futures_util::future::join_all(creates).await {
            r?;
        }
        Ok(())
    }
    async fn claim_work(&self, partition: usize, max: usize, wait: Duration) -> Result<Vec<WorkItem>, StoreError> {
        let Some(part) = self.partitions.get(partition) else { return Ok(Vec::new()) };
        let max = max.max(1);
        let taken = self.reclaim(part, max).await?;
        if !taken.is_empty() {
            return Ok(taken);
        }
        let keys: Vec<String> = part
            .shards
            .iter()
            .flat_map(|s| self.caps().into_iter().map(move |c| (*s, c)))
            .map(|(s, c)| self.stream_key(s, &c))
            .collect();
        if keys.is_empty() {
            tokio::time::sleep(wait).await;
            return Ok(Vec::new());
        }
        let wait = wait.min(crate::store::CLAIM_WAIT);
        let consumer = self.consumer.clone();
        let read = async {
            let mut c = part.reader.get().await?;
            let mut cmd = redis::cmd("XREADGROUP");
            cmd.arg("GROUP").arg(GROUP).arg(&consumer).arg("COUNT").arg(max).arg("BLOCK").arg(wait.as_millis() as u64);
            cmd.arg("STREAMS").arg(&keys);
            for _ in &keys {
                cmd.arg(">");
            }
            cmd.query_async::<Option<StreamReadReply>>(&mut c)
                .await
                .map_err(|e| StoreError(format!("redis claim: {e}")))
        };
        let reply = match tokio::time::timeout(wait + self.op(), read).await {
            Ok(r) => r?,
            Err(_) => return Err(StoreError("redis claim: no answer in time".into())),
        };
        let mut entries = Vec::new();
        for k in reply.map(|r| r.keys).unwrap_or_default() {
            entries.extend(k.ids.into_iter().map(|e| (k.key.clone(), e, 1)));
        }
        self.check_claimed(entries).await
    }
    async fn touch_work(&self, items: &[WorkItem]) -> Result<(), StoreError> {
        for item in items {
            let key = self.stream_key(self.shard_of(&item.execution_id), &item.capability);
            let consumer = self.consumer.clone();
            let entry = item.receipt.clone();
            self.run("touch work", move |mut c| async move {
                redis::cmd("XCLAIM")
                    .arg(&key)
                    .arg(GROUP)
                    .arg(&consumer)
                    .arg(0)
                    .arg(&entry)
                    .arg("JUSTID")
                    .query_async::<()>(&mut c)
                    .await
            })
            .await?;
        }
        Ok(())
    }
    async fn complete_work(
        &self,
        item: &WorkItem,
        t: Option<Transition>,
        seen: Option<&ExecutionRecord>,
    ) -> Result<Option<TransitionOutcome>, StoreError> {
        match t {
            Some(t) => Ok(Some(self.apply(&item.execution_id, &t, seen, Some(item), false).await?.0)),
            None => {
                self.release(item).await?;
                Ok(None)
            }
        }
    }
    fn visibility_timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.visibility_timeout_ms)
    }
}

#[async_trait::async_trait]
impl ReplayMemory for RedisStore {
    async fn remember_jti(&self, issuer: &str, jti: &str, until_ms: u64) -> Result<bool, StoreError> {
        match self.admit_jti(issuer, jti, until_ms).await? {
            Nonce::Fresh => Ok(true),
            Nonce::Replay => Ok(false),
            Nonce::Refused(q) => {
                Err(StoreError(format!("the replay memory holds the signer's {} ({}) nonces", q.quota, q.limit)))
            }
        }
    }
    async fn admit_jti(&self, issuer: &str, jti: &str, until_ms: u64) -> Result<Nonce, StoreError> {
        let quota = self.quota_nonces.load(Ordering::Relaxed);
        let mut inv = self.share.prepare_invoke();
        inv.key(self.sender_key(issuer, "j"))
            .arg(sha_hex(&[issuer, jti]))
            .arg(until_ms.max(1))
            .arg(now_ms())
            .arg(quota);
        let r: i64 = self.run("remember nonce", move |mut c| async move { inv.invoke_async(&mut c).await }).await?;
        Ok(match r {
            1 => Nonce::Fresh,
            0 => Nonce::Replay,
            _ => Nonce::Refused(QuotaExceeded { quota: "max_nonces_per_sender", limit: quota, retry_after_ms: 1000 }),
        })
    }
}

#[async_trait::async_trait]
impl Store for RedisStore {
    async fn ping(&self) -> Result<(), StoreError> {
        self.run("ping", move |mut c| async move { redis::cmd("PING").query_async::<()>(&mut c).await }).await
    }
}

#[cfg(test)]
mod tests {
    use super::Waiters;

    /// Whether a waiter registered for `id` is woken (notified) by what `act` does.
    fn wakes(w: &Waiters, id: &str, act: impl FnOnce()) -> bool {
        let n = w.register(id);
        let notified = n.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        act();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::future::Future::poll(notified.as_mut(), &mut cx).is_ready()
    }

    #[test]
    fn a_signal_without_a_write_in_flight_wakes_at_once_and_is_remembered() {
        let w = Waiters::default();
        assert!(wakes(&w, "e1", || w.signal("e1")));
        assert!(w.fired("e1"));
        assert!(!w.fired("e2"));
    }

    #[test]
    fn a_signal_during_this_process_s_own_terminal_write_is_held_until_the_write_ends() {
        let w = Waiters::default();
        // Applied: held while in flight, then one wake-up when the guard ends (the record is known as final by then).
        let mut guard = w.begin_write("e1");
        assert!(!wakes(&w, "e1", || w.signal("e1")), "woken before the write's record was final");
        assert!(!w.fired("e1"));
        guard.applied = true;
        assert!(wakes(&w, "e1", || drop(guard)));
        assert!(w.fired("e1"));
        // Not applied (a conflict, an error, a dropped future): a held signal is delivered all the same.
        let guard = w.begin_write("e2");
        w.signal("e2");
        assert!(wakes(&w, "e2", || drop(guard)), "a held signal was lost");
        // Not applied and no signal came: nobody is woken, and the id is not marked.
        let guard = w.begin_write("e3");
        assert!(!wakes(&w, "e3", || drop(guard)));
        assert!(!w.fired("e3"));
        // Two writes of one id in flight: held until the last ends.
        let (first, second) = (w.begin_write("e4"), w.begin_write("e4"));
        w.signal("e4");
        drop(first);
        assert!(w.fired("e4"), "the first write's end delivers the held signal");
        assert!(wakes(&w, "e4", || drop(second)), "the last write's end delivers it too");
        // Nothing stays in flight: a later signal is not held.
        assert!(w.lock().writing.is_empty());
        assert!(wakes(&w, "e3", || w.signal("e3")));
    }
}
