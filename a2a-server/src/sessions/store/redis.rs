//! The Redis [`SessionStore`]: the state of sessions shared by every process and agent on one Redis,
//! on the connection and configuration of the agent's [`RedisStore`].
//!
//! Every key carries the hash tag `{<prefix>:sessions}`, so that a cluster keeps them on one slot:
//!
//! | key | type | what | expiry |
//! |---|---|---|---|
//! | `…:sessions` | hash address → JSON | sessions (stale ones hidden after 24 h, removed after 48 h) | — |
//! | `…:run:<id>` | string | a run | its retention after its deadline / `done` |
//! | `…:answer:<run>/<step>/<turn>` | string (SET NX) | an inbox owner's answer | the delivery's deadline + 60 s |
//! | `…:inbox:<address>` | hash run id → JSON | deliveries waiting in an inbox | 24 h after the last |
//! | `…:inboxo:<address>`, `…:inboxu:<address>` | sorted sets of run ids | the inbox in its order (priority, then age), and by expiry | as the inbox |
//! | `…:tr:<address>`, `…:trseq:<address>` | list, counter | a transcript (newest kept) | 24 h after the last message |
//! | `…:trc:<address>` | list | the transcript without `tool` messages (newest kept) | as the transcript |
//! | `…:events`, `…:eventseq` | sorted set by id, counter | the event buffer | 24 h after the last event |
//! | `…:edges` | hash `from␉to␉token` → until | wait edges (POL-6) | until their wait ends |
//!
//! Reads of a page read only the page (LIM-6): history reads the newest `limit + 1` of the transcript, or of its
//! copy without `tool` messages (`LRANGE` from the end), and an inbox read first drops its expired deliveries (each
//! once, by `inboxu`) then reads the first `max` of `inboxo` and their deliveries (`HMGET`), in one script. Transcripts
//! and inboxes written by versions before this one have neither the copy nor the sorted sets, and read as empty until
//! they expire (24 h).
//!
//! Writes publish on the channel `<prefix>:sessions:changed`; every process subscribes and bumps its change signal,
//! so a waiter here is woken by a write there without polling.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use a2a_core::sessions::{HistoryMessage, Role, RunReply};
use redis::{Cmd, Pipeline, Script};
use serde_json::Value;
use tokio::sync::watch;

use super::{
    Event, EventsAfter, InboxItem, RunRecord, SessionRecord, SessionStore, StoreError, StoredMessage, rfc3339,
    sort_inbox,
};
use crate::store::RedisStore;
use crate::store::now_ms;
use crate::store::redis::RedisConfig;

/// How long a transcript, an event buffer or an idle inbox is kept after its last write.
const KEEP_MS: u64 = 24 * 60 * 60 * 1000;

/// Sessions state on Redis.
pub struct RedisSessionStore {
    redis: Arc<RedisStore>,
    tag: String,
    channel: String,
    tx: watch::Sender<u64>,
    /// Transcript messages and inbox deliveries the reads got from Redis so far.
    read: AtomicU64,
    _subscriber: tokio_util::sync::DropGuard,
}

/// Appends a message. KEYS: the transcript, its counter, its copy without `tool` messages. ARGV: the message (JSON),
/// the messages kept, the expiry, the time (RFC 3339), the channel, '1' when it goes to the copy too.
const APPEND: &str = r"
local seq = redis.call('INCR', KEYS[2])
local line = seq .. '\n' .. ARGV[4] .. '\n' .. ARGV[1]
redis.call('RPUSH', KEYS[1], line)
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if ARGV[6] == '1' then
  redis.call('RPUSH', KEYS[3], line)
  redis.call('LTRIM', KEYS[3], -tonumber(ARGV[2]), -1)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
redis.call('PUBLISH', ARGV[5], 'transcript')
return seq
";

/// The first deliveries of an inbox. KEYS: the deliveries (hash), their order, their expiry (sorted sets). ARGV: now,
/// the index of the last one. Drops the expired deliveries first (each once; 500 per step), then answers the first of the order.
const INBOX: &str = r"
while true do
  local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, 500)
  if #gone == 0 then break end
  redis.call('HDEL', KEYS[1], unpack(gone))
  redis.call('ZREM', KEYS[2], unpack(gone))
  redis.call('ZREM', KEYS[3], unpack(gone))
end
local ids = redis.call('ZRANGE', KEYS[2], 0, ARGV[2])
if #ids == 0 then return {} end
return redis.call('HMGET', KEYS[1], unpack(ids))
";

/// Deliveries one inbox read answers at most.
const INBOX_PAGE: usize = 1000;

/// Where a delivery sorts in its inbox: higher priority first, then oldest first (SND-12), as one exact score
/// (`(255 - priority) * 2^45 + queued_ms` stays below 2^53).
fn inbox_score(item: &InboxItem) -> u64 {
    (255 - u64::from(item.priority)) * (1u64 << 45) + item.queued_ms.min((1u64 << 45) - 1)
}

const PUBLISH: &str = r"
local id = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], id, id .. '\n' .. ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
if n > tonumber(ARGV[2]) then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - tonumber(ARGV[2]) - 1) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], 'event')
return id
";

fn json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError(format!("cannot encode: {e}")))
}

fn parse<T: serde::de::DeserializeOwned>(s: &str) -> Option<T> {
    match serde_json::from_str(s) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(error = %e, "a sessions record in Redis does not parse; ignored");
            None
        }
    }
}

impl RedisSessionStore {
    /// The sessions store on `redis` (the agent's store), subscribing to changes with `cfg`. Must be called inside a
    /// Tokio runtime.
    pub fn new(redis: Arc<RedisStore>, cfg: &RedisConfig) -> Arc<Self> {
        let prefix = redis.key_prefix().to_owned();
        let channel = format!("{prefix}:sessions:changed");
        let (tx, _) = watch::channel(0u64);
        let stop = tokio_util::sync::CancellationToken::new();
        let (woken, bumped) = (tx.clone(), tx.clone());
        tokio::spawn(crate::store::redis::subscribe(
            cfg.clone(),
            vec![channel.clone()],
            stop.clone(),
            // Writes made while the subscription was down woke nobody: wake every waiter once to re-read.
            move || woken.send_modify(|v| *v = v.wrapping_add(1)),
            move |_| bumped.send_modify(|v| *v = v.wrapping_add(1)),
        ));
        Arc::new(RedisSessionStore {
            redis,
            tag: format!("{{{prefix}:sessions}}"),
            channel,
            tx,
            read: AtomicU64::new(0),
            _subscriber: stop.drop_guard(),
        })
    }

    /// Transcript messages and inbox deliveries the reads got from Redis so far (LIM-6: a read of a page gets the
    /// page, whatever the length of the transcript or inbox).
    pub fn entries_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    fn key(&self, part: &str) -> String {
        format!("{}:{part}", self.tag)
    }

    /// An inbox's keys: its deliveries, their order, their expiry.
    fn inbox_keys(&self, session: &str) -> [String; 3] {
        ["inbox", "inboxo", "inboxu"].map(|k| self.key(&format!("{k}:{session}")))
    }

    fn bump(&self) {
        self.tx.send_modify(|v| *v = v.wrapping_add(1));
    }

    async fn write(&self, what: &str, mut p: Pipeline) -> Result<(), StoreError> {
        p.cmd("PUBLISH").arg(&self.channel).arg(what).ignore();
        let out = self.redis.pipeline(what, p).await;
        self.bump();
        out
    }
}

#[async_trait::async_trait]
impl SessionStore for RedisSessionStore {
    fn changes(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }

    async fn put_session(&self, rec: &SessionRecord) -> Result<(), StoreError> {
        let mut p = redis::pipe();
        p.cmd("HSET").arg(self.key("sessions")).arg(rec.session.address.to_string()).arg(json(rec)?).ignore();
        self.write("put_session", p).await
    }

    async fn get_session(&self, address: &str) -> Result<Option<SessionRecord>, StoreError> {
        let v: Option<String> = self.redis.command("get_session", Cmd::hget(self.key("sessions"), address)).await?;
        Ok(v.as_deref().and_then(parse))
    }

    async fn list_sessions(&self, max: usize) -> Result<Vec<SessionRecord>, StoreError> {
        let all: Vec<(String, String)> =
            self.redis.command("list_sessions", Cmd::hgetall(self.key("sessions"))).await?;
        let now = now_ms();
        let mut out = Vec::new();
        let mut gone = Vec::new();
        for (address, v) in all {
            match parse::<SessionRecord>(&v) {
                // Twice the staleness: removed (SES-6 MAY).
                Some(r) if now.saturating_sub(r.updated_ms) > 2 * KEEP_MS => gone.push(address),
                Some(r) if out.len() < max => out.push(r),
                _ => {}
            }
        }
        if !gone.is_empty() {
            let _: Result<i64, _> = self.redis.command("drop_stale", Cmd::hdel(self.key("sessions"), gone)).await;
        }
        Ok(out)
    }

    async fn delete_session(&self, address: &str) -> Result<(), StoreError> {
        let mut p = redis::pipe();
        p.cmd("HDEL").arg(self.key("sessions")).arg(address).ignore();
        self.write("delete_session", p).await
    }

    async fn put_run(&self, rec: &RunRecord, retention_ms: u64) -> Result<(), StoreError> {
        let now = now_ms();
        let until = rec.done_ms.unwrap_or(rec.deadline_ms.max(now)).saturating_add(retention_ms);
        let mut p = redis::pipe();
        p.cmd("SET")
            .arg(self.key(&format!("run:{}", rec.run.run_id)))
            .arg(json(rec)?)
            .arg("PX")
            .arg(until.saturating_sub(now).max(1))
            .ignore();
        self.write("put_run", p).await
    }

    async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        let v: Option<String> = self.redis.command("get_run", Cmd::get(self.key(&format!("run:{id}")))).await?;
        Ok(v.as_deref().and_then(parse))
    }

    async fn put_answer(&self, run_id: &str, answer: &RunReply, ttl_ms: u64) -> Result<bool, StoreError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(&format!("answer:{run_id}"))).arg(json(answer)?).arg("NX").arg("PX").arg(ttl_ms.max(1));
        let set: Option<String> = self.redis.command("put_answer", cmd).await?;
        let _: Result<i64, _> = self.redis.command("publish", Cmd::publish(&self.channel, "answer")).await;
        self.bump();
        Ok(set.is_some())
    }

    async fn get_answer(&self, run_id: &str) -> Result<Option<RunReply>, StoreError> {
        let v: Option<String> =
            self.redis.command("get_answer", Cmd::get(self.key(&format!("answer:{run_id}")))).await?;
        Ok(v.as_deref().and_then(parse))
    }

    async fn push_inbox(&self, session: &str, item: &InboxItem) -> Result<(), StoreError> {
        let [key, order, until] = self.inbox_keys(session);
        let keep = KEEP_MS.max(item.until_ms.saturating_sub(now_ms()));
        let id = &item.delivery.run_id;
        let mut p = redis::pipe();
        p.atomic();
        p.cmd("HSET").arg(&key).arg(id).arg(json(item)?).ignore();
        p.cmd("ZADD").arg(&order).arg(inbox_score(item)).arg(id).ignore();
        p.cmd("ZADD").arg(&until).arg(item.until_ms).arg(id).ignore();
        for k in [&key, &order, &until] {
            p.cmd("PEXPIRE").arg(k).arg(keep).ignore();
        }
        self.write("push_inbox", p).await
    }

    async fn inbox(&self, session: &str, max: usize) -> Result<Vec<InboxItem>, StoreError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let script = Script::new(INBOX);
        let mut inv = script.prepare_invoke();
        for k in self.inbox_keys(session) {
            inv.key(k);
        }
        // The page is unpacked on the script's stack: at most INBOX_PAGE ids (SES-5's batch is at most 32).
        inv.arg(now).arg(max.min(INBOX_PAGE) - 1);
        let page: Vec<Option<String>> = self.redis.invoke("inbox", inv).await?;
        self.read.fetch_add(page.len() as u64, Ordering::Relaxed);
        let mut items: Vec<InboxItem> =
            page.iter().flatten().filter_map(|v| parse::<InboxItem>(v)).filter(|i| i.until_ms > now).collect();
        // Equal scores are in the order of their run ids; the store's order is the same everywhere.
        sort_inbox(&mut items);
        Ok(items)
    }

    async fn inbox_item(&self, session: &str, run_id: &str) -> Result<Option<InboxItem>, StoreError> {
        let [key, ..] = self.inbox_keys(session);
        let v: Option<String> = self.redis.command("inbox_item", Cmd::hget(key, run_id)).await?;
        let now = now_ms();
        Ok(v.as_deref().and_then(parse::<InboxItem>).filter(|i| i.until_ms > now))
    }

    async fn remove_inbox(&self, session: &str, run_id: &str) -> Result<(), StoreError> {
        let [key, order, until] = self.inbox_keys(session);
        let mut p = redis::pipe();
        p.atomic();
        p.cmd("HDEL").arg(&key).arg(run_id).ignore();
        p.cmd("ZREM").arg(&order).arg(run_id).ignore();
        p.cmd("ZREM").arg(&until).arg(run_id).ignore();
        self.write("remove_inbox", p).await
    }

    async fn append_message(&self, session: &str, msg: &StoredMessage, keep: usize) -> Result<u64, StoreError> {
        let script = Script::new(APPEND);
        let mut inv = script.prepare_invoke();
        inv.key(self.key(&format!("tr:{session}")))
            .key(self.key(&format!("trseq:{session}")))
            .key(self.key(&format!("trc:{session}")))
            .arg(json(msg)?)
            .arg(keep.max(1))
            .arg(KEEP_MS)
            .arg(rfc3339(now_ms()))
            .arg(&self.channel)
            .arg(if msg.role == Role::Tool { "0" } else { "1" });
        let seq: u64 = self.redis.invoke("append_message", inv).await?;
        self.bump();
        Ok(seq)
    }

    async fn recent_messages(
        &self,
        session: &str,
        max: usize,
        include_tools: bool,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let list = if include_tools { "tr" } else { "trc" };
        let from = -isize::try_from(max).unwrap_or(isize::MAX);
        let page: Vec<String> =
            self.redis.command("messages", Cmd::lrange(self.key(&format!("{list}:{session}")), from, -1)).await?;
        self.read.fetch_add(page.len() as u64, Ordering::Relaxed);
        Ok(page
            .iter()
            .filter_map(|line| {
                let mut parts = line.splitn(3, '\n');
                let seq = parts.next()?.parse().ok()?;
                let at = parts.next()?.to_owned();
                let msg: StoredMessage = parse(parts.next()?)?;
                Some(msg.at(seq, at))
            })
            .collect())
    }

    async fn delete_messages(&self, session: &str) -> Result<(), StoreError> {
        let mut p = redis::pipe();
        p.cmd("DEL").arg(self.key(&format!("tr:{session}"))).ignore();
        p.cmd("DEL").arg(self.key(&format!("trc:{session}"))).ignore();
        self.write("delete_messages", p).await
    }

    async fn publish(&self, event: &str, session: &str, data: Value, keep: usize) -> Result<Event, StoreError> {
        let mut e = Event { id: 0, event: event.to_owned(), session: session.to_owned(), data, at_ms: now_ms() };
        let script = Script::new(PUBLISH);
        let mut inv = script.prepare_invoke();
        inv.key(self.key("events"))
            .key(self.key("eventseq"))
            .arg(json(&e)?)
            .arg(keep.max(1))
            .arg(KEEP_MS)
            .arg(&self.channel);
        e.id = self.redis.invoke("publish", inv).await?;
        self.bump();
        Ok(e)
    }

    async fn events_after(&self, after: Option<u64>, max_age_ms: u64) -> Result<EventsAfter, StoreError> {
        let from = format!("({}", after.unwrap_or(0));
        let found: Vec<String> =
            self.redis.command("events_after", Cmd::zrangebyscore(self.key("events"), from, "+inf")).await?;
        let oldest_kept = now_ms().saturating_sub(max_age_ms);
        let decode = |line: &String| -> Option<Event> {
            let (id, rest) = line.split_once('\n')?;
            let mut e: Event = parse(rest)?;
            e.id = id.parse().ok()?;
            Some(e)
        };
        let events: Vec<Event> = found.iter().filter_map(decode).filter(|e| e.at_ms >= oldest_kept).collect();
        let gap = match after {
            None => false,
            Some(a) => {
                let first: Vec<(String, f64)> =
                    self.redis.command("events_first", Cmd::zrange_withscores(self.key("events"), 0, 0)).await?;
                let next: Option<u64> = self.redis.command("events_seq", Cmd::get(self.key("eventseq"))).await?;
                match first.first() {
                    Some((_, score)) => a.saturating_add(1) < *score as u64,
                    None => next.is_some_and(|n| a < n),
                }
            }
        };
        Ok(EventsAfter { gap, events })
    }

    async fn add_wait_edge(&self, from: &str, to: &str, token: &str, until_ms: u64) -> Result<(), StoreError> {
        let mut p = redis::pipe();
        p.cmd("HSET").arg(self.key("edges")).arg(format!("{from}\t{to}\t{token}")).arg(until_ms).ignore();
        self.write("add_wait_edge", p).await
    }

    async fn remove_wait_edge(&self, from: &str, to: &str, token: &str) -> Result<(), StoreError> {
        let mut p = redis::pipe();
        p.cmd("HDEL").arg(self.key("edges")).arg(format!("{from}\t{to}\t{token}")).ignore();
        self.write("remove_wait_edge", p).await
    }

    async fn wait_edges(&self) -> Result<Vec<(String, String)>, StoreError> {
        let all: Vec<(String, u64)> = self.redis.command("wait_edges", Cmd::hgetall(self.key("edges"))).await?;
        let now = now_ms();
        let mut out = Vec::new();
        let mut expired = Vec::new();
        for (field, until) in all {
            let mut parts = field.split('\t');
            match (parts.next(), parts.next()) {
                (Some(a), Some(b)) if until > now => out.push((a.to_owned(), b.to_owned())),
                _ => expired.push(field),
            }
        }
        if !expired.is_empty() {
            let _: Result<i64, _> = self.redis.command("drop_edges", Cmd::hdel(self.key("edges"), expired)).await;
        }
        Ok(out)
    }
}
