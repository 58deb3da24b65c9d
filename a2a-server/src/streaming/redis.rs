//! The [`EventLog`] on Redis, beside a [`RedisStore`]: every process on the same Redis serves and resumes every
//! stream (STR-5, STR-11).
//!
//! ## Keys
//!
//! Both keys carry the execution's hash tag (`{<prefix>:<ns>:<k>}`, see `crate::store::redis`), so that the one Lua
//! script that appends touches one slot of a cluster, and both expire at the execution's retention:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{…:k}:e:<execution_id>` | stream | the events, with the entry ids `0-1`, `0-2`, ... (the event ids) and the fields `k` (type), `d` (data) |
//! | `{…:k}:em:<execution_id>` | hash | `n` last id, `pc` / `pb` progress events / bytes kept, `tr` truncated, `fin` id of the final event |
//!
//! An append is one script (one round trip): it refuses after `fin`, applies the limits (STR-8), takes the next id
//! with `HINCRBY` and `XADD`s the entry with that explicit id. A read is one `XRANGE` from the next id. A quiet stream
//! is woken at once by appends made in its own process and otherwise reads again every `poll_ms`.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;

use super::{Appended, EventKind, EventLimits, EventLog, StreamEvent, Wakers};
use crate::store::{RedisStore, StoreError};

const APPEND_LUA: &str = r"
local fin = redis.call('HGET', KEYS[2], 'fin')
if fin then return {'sealed', tonumber(fin)} end
local function add(kind, data)
  local n = redis.call('HINCRBY', KEYS[2], 'n', 1)
  redis.call('XADD', KEYS[1], '0-' .. n, 'k', kind, 'd', data)
  return n
end
local function keep()
  redis.call('PEXPIREAT', KEYS[1], ARGV[6])
  redis.call('PEXPIREAT', KEYS[2], ARGV[6])
end
local mode = ARGV[3]
if mode == 'p' then
  if redis.call('HGET', KEYS[2], 'tr') then return {'dropped', 0} end
  local pc = tonumber(redis.call('HGET', KEYS[2], 'pc') or '0')
  local pb = tonumber(redis.call('HGET', KEYS[2], 'pb') or '0')
  local len = string.len(ARGV[2])
  if pc + 1 > tonumber(ARGV[4]) or pb + len > tonumber(ARGV[5]) then
    redis.call('HSET', KEYS[2], 'tr', '1')
    local n = add('truncated', ARGV[7])
    keep()
    return {'truncated', n}
  end
  redis.call('HSET', KEYS[2], 'pc', pc + 1, 'pb', pb + len)
end
local n = add(ARGV[1], ARGV[2])
if mode == 'f' then redis.call('HSET', KEYS[2], 'fin', n) end
keep()
return {'ok', n}
";

/// The Redis event log.
pub struct RedisEventLog {
    store: Arc<RedisStore>,
    limits: EventLimits,
    poll: Duration,
    append: Script,
    wakers: Wakers,
}

impl RedisEventLog {
    /// A log in the Redis of `store`, with these per-execution limits; quiet streams read again every `poll`.
    pub fn new(store: Arc<RedisStore>, limits: EventLimits, poll: Duration) -> Self {
        RedisEventLog { store, limits, poll, append: Script::new(APPEND_LUA), wakers: Wakers::default() }
    }

    fn keys(&self, id: &str) -> (String, String) {
        let tag = self.store.execution_tag(id);
        (format!("{tag}:e:{id}"), format!("{tag}:em:{id}"))
    }

    async fn run_append(
        &self,
        id: &str,
        kind: EventKind,
        data: &str,
        mode: &str,
        retain_until_ms: u64,
    ) -> Result<(String, u64), StoreError> {
        let (events, meta) = self.keys(id);
        let mut inv = self.append.prepare_invoke();
        inv.key(events)
            .key(meta)
            .arg(kind.as_str())
            .arg(data)
            .arg(mode)
            .arg(self.limits.max_events)
            .arg(self.limits.max_bytes)
            .arg(retain_until_ms)
            .arg(self.limits.truncated_data());
        let (what, n): (String, i64) = self.store.invoke("append stream event", inv).await?;
        self.wakers.wake(id);
        Ok((what, u64::try_from(n).unwrap_or(0)))
    }
}

fn event_of(entry: &redis::streams::StreamId) -> Option<StreamEvent> {
    let id = entry.id.strip_prefix("0-")?.parse::<u64>().ok()?;
    let kind = EventKind::parse(&entry.get::<String>("k")?)?;
    let data = entry.get::<String>("d")?;
    Some(StreamEvent { id, kind, data })
}

#[async_trait::async_trait]
impl EventLog for RedisEventLog {
    async fn append(
        &self,
        execution_id: &str,
        kind: EventKind,
        data: &str,
        retain_until_ms: u64,
    ) -> Result<Appended, StoreError> {
        let mode = if kind == EventKind::Progress { "p" } else { "s" };
        let (what, n) = self.run_append(execution_id, kind, data, mode, retain_until_ms).await?;
        Ok(match what.as_str() {
            "ok" => Appended::Ok(n),
            "truncated" => Appended::Truncated(n),
            "dropped" => Appended::Dropped,
            _ => Appended::Sealed,
        })
    }

    async fn finish(&self, execution_id: &str, data: &str, retain_until_ms: u64) -> Result<u64, StoreError> {
        let (_, n) = self.run_append(execution_id, EventKind::Result, data, "f", retain_until_ms).await?;
        Ok(n)
    }

    async fn read(&self, execution_id: &str, after: u64, max: usize) -> Result<Vec<StreamEvent>, StoreError> {
        let (events, _) = self.keys(execution_id);
        let mut cmd = redis::cmd("XRANGE");
        cmd.arg(events).arg(format!("0-{}", after.saturating_add(1))).arg("+").arg("COUNT").arg(max.max(1));
        let reply: redis::streams::StreamRangeReply = self.store.command("read stream events", cmd).await?;
        let mut out = Vec::with_capacity(reply.ids.len());
        for entry in &reply.ids {
            match event_of(entry) {
                Some(e) => out.push(e),
                None => return Err(StoreError(format!("stream event {} of {execution_id} is unreadable", entry.id))),
            }
        }
        Ok(out)
    }

    async fn last_id(&self, execution_id: &str) -> Result<u64, StoreError> {
        let (_, meta) = self.keys(execution_id);
        let mut cmd = redis::cmd("HGET");
        cmd.arg(meta).arg("n");
        let n: Option<u64> = self.store.command("read stream length", cmd).await?;
        Ok(n.unwrap_or(0))
    }

    async fn wait(&self, execution_id: &str, _after: u64, timeout: Duration) {
        let notify = self.wakers.register(execution_id);
        let _ = tokio::time::timeout(timeout.min(self.poll), notify.notified()).await;
    }
}
