//! Webhook announce (ANN-5): every event the agent publishes to its channel (`announce`, `run`, `spawn`) is also
//! POSTed to the configured webhooks as a [`WebhookEvent`], signed as a response would be (§9.5, INT-10: `sts` 200,
//! `payload_hash` coverage) when the agent has a key.
//!
//! Publishing never waits for a webhook: the event is put on a bounded queue per webhook and a task per webhook
//! posts it, with a time limit per post and retries with doubling backoff. A full queue drops its oldest post
//! (counted in [`WebhookStats::dropped`] and logged), so a dead or slow receiver costs bounded memory and never
//! holds up a run or another webhook.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2a_core::headers as h;
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::keys::SigningKey;
use a2a_core::sessions::{EVENT_ID_HEADER, WebhookEvent};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::config::WebhookConfig;
use super::store::{Event, rfc3339};

/// The longest wait between two tries of one post.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What happened to the posts of one webhook since the agent started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookStats {
    /// The webhook's URL.
    pub url: String,
    /// Events the webhook accepted (a `2xx` answer).
    pub delivered: u64,
    /// Events given up on: every try failed, or the webhook refused it for good (a `4xx` other than 408 and 429).
    pub failed: u64,
    /// Tries after a first failure.
    pub retried: u64,
    /// Events dropped unposted because the webhook's queue was full (the oldest go first).
    pub dropped: u64,
    /// Events waiting to be posted now.
    pub queued: usize,
}

/// One webhook: its queue and counters.
struct Target {
    url: url::Url,
    /// The request target of the post (path and query), as the signature's `htu` names it.
    htu: String,
    queue: Mutex<VecDeque<WebhookEvent>>,
    capacity: usize,
    wake: Notify,
    delivered: AtomicU64,
    failed: AtomicU64,
    retried: AtomicU64,
    dropped: AtomicU64,
}

impl Target {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<WebhookEvent>> {
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What every post of an agent shares: who signs, for whom, with which client and limits.
struct Poster {
    did: String,
    audience: String,
    signer: Option<(String, SigningKey)>,
    http: reqwest::Client,
    timeout: Duration,
    retries: u32,
    backoff: Duration,
}

/// Why one try of a post failed.
struct TryFailure {
    /// Whether another try may succeed (a network failure, a time-out, `5xx`, `408`, `429`).
    again: bool,
    why: String,
}

/// The webhooks of an agent's sessions (ANN-5).
pub(crate) struct Webhooks {
    did: String,
    targets: Vec<Arc<Target>>,
}

impl Webhooks {
    /// Starts a posting task per webhook of `config`; they stop with `stop`. `None` when no webhook is configured.
    pub(crate) fn start(
        config: &WebhookConfig,
        did: &str,
        signer: Option<(String, SigningKey)>,
        stop: &CancellationToken,
    ) -> Result<Option<Webhooks>, String> {
        if config.urls.is_empty() {
            return Ok(None);
        }
        config.validate()?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "sessions webhooks need a Tokio runtime: build the agent inside one".to_owned())?;
        let timeout = Duration::from_millis(config.timeout_ms);
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // A webhook answers where it is configured; a redirect elsewhere is not followed.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("sessions webhooks: {e}"))?;
        let poster = Arc::new(Poster {
            did: did.to_owned(),
            audience: config.audience.clone().unwrap_or_else(|| did.to_owned()),
            signer,
            http,
            timeout,
            retries: config.retries,
            backoff: Duration::from_millis(config.backoff_ms),
        });
        let mut targets = Vec::new();
        for u in &config.urls {
            let url = url::Url::parse(u).map_err(|e| format!("sessions.webhooks.urls: {u:?}: {e}"))?;
            let htu = match url.query() {
                Some(q) => format!("{}?{q}", url.path()),
                None => url.path().to_owned(),
            };
            let target = Arc::new(Target {
                url,
                htu,
                queue: Mutex::new(VecDeque::new()),
                capacity: config.queue_capacity,
                wake: Notify::new(),
                delivered: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                retried: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            });
            runtime.spawn(post_loop(target.clone(), poster.clone(), stop.clone()));
            targets.push(target);
        }
        Ok(Some(Webhooks { did: did.to_owned(), targets }))
    }

    /// Queues `event` for every webhook, at once: the oldest waiting post of a full queue is dropped.
    pub(crate) fn enqueue(&self, event: &Event) {
        let body = WebhookEvent {
            agent: self.did.clone(),
            id: event.id,
            event: event.event.clone(),
            session: event.session.clone(),
            data: event.data.clone(),
            at: rfc3339(event.at_ms),
        };
        for t in &self.targets {
            let dropped = {
                let mut q = t.lock();
                let dropped = if q.len() >= t.capacity { q.pop_front() } else { None };
                q.push_back(body.clone());
                dropped
            };
            if let Some(d) = dropped {
                let n = t.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(webhook = %t.url, event_id = d.id, dropped = n,
                    "a webhook's queue is full: its oldest event was dropped unposted");
            }
            t.wake.notify_one();
        }
    }

    /// The counters of every webhook, in the configured order.
    pub(crate) fn stats(&self) -> Vec<WebhookStats> {
        self.targets
            .iter()
            .map(|t| WebhookStats {
                url: t.url.to_string(),
                delivered: t.delivered.load(Ordering::Relaxed),
                failed: t.failed.load(Ordering::Relaxed),
                retried: t.retried.load(Ordering::Relaxed),
                dropped: t.dropped.load(Ordering::Relaxed),
                queued: t.lock().len(),
            })
            .collect()
    }
}

/// Posts the events of one webhook's queue, oldest first, until `stop`.
async fn post_loop(target: Arc<Target>, poster: Arc<Poster>, stop: CancellationToken) {
    loop {
        let next = target.lock().pop_front();
        let Some(event) = next else {
            tokio::select! {
                () = stop.cancelled() => return,
                () = target.wake.notified() => continue,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = poster.deliver(&target, &event) => {}
        }
    }
}

impl Poster {
    /// Tries `event` up to `1 + retries` times, waiting `backoff`, then twice as long, ... between tries.
    async fn deliver(&self, target: &Target, event: &WebhookEvent) {
        let body = match serde_json::to_vec(event) {
            Ok(b) => b,
            Err(e) => {
                target.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(webhook = %target.url, error = %e, "cannot encode a webhook event");
                return;
            }
        };
        let mut wait = self.backoff;
        let mut last = String::new();
        for attempt in 0..=self.retries {
            if attempt > 0 {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_BACKOFF);
                target.retried.fetch_add(1, Ordering::Relaxed);
            }
            match self.try_post(target, event.id, &body).await {
                Ok(()) => {
                    target.delivered.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(f) => {
                    tracing::debug!(webhook = %target.url, event_id = event.id, attempt, "webhook post failed: {}", f.why);
                    last = f.why;
                    if !f.again {
                        break;
                    }
                }
            }
        }
        target.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(webhook = %target.url, event_id = event.id, "gave up posting an event to a webhook: {last}");
    }

    /// One signed POST of `body`.
    async fn try_post(&self, target: &Target, id: u64, body: &[u8]) -> Result<(), TryFailure> {
        let id_value = id.to_string();
        let mut rb = self
            .http
            .post(target.url.clone())
            .header(h::A2A_VERSION, a2a_core::PROTOCOL_VERSION)
            .header(h::A2A_SENDER_ID, &self.did)
            .header(EVENT_ID_HEADER, &id_value)
            .header("content-type", "application/json");
        if let Some((key_id, key)) = &self.signer {
            // Signed afresh for every try (INT-5), as the response a request for this event would get (INT-10).
            let headers = [
                (h::A2A_VERSION, a2a_core::PROTOCOL_VERSION),
                (h::A2A_SENDER_ID, self.did.as_str()),
                ("a2a-event-id", id_value.as_str()),
            ];
            let parts =
                MessageParts { method: "POST", target: &target.htu, headers: &headers, body, status: Some(200) };
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
            let sig = integrity::sign(key, key_id, &self.did, &self.audience, Coverage::PayloadHash, &parts, now, 60)
                .map_err(|e| TryFailure { again: false, why: format!("cannot sign the post: {e}") })?;
            rb = rb.header(h::A2A_SIGNATURE, sig);
        }
        let sent = tokio::time::timeout(self.timeout, rb.body(body.to_vec()).send()).await;
        let resp = match sent {
            Err(_) => return Err(TryFailure { again: true, why: format!("no answer within {:?}", self.timeout) }),
            Ok(Err(e)) => return Err(TryFailure { again: true, why: e.to_string() }),
            Ok(Ok(r)) => r,
        };
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let again = status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429;
        Err(TryFailure { again, why: format!("the webhook answered {status}") })
    }
}
