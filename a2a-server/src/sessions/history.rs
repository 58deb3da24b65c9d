//! History (§17.7): a session's transcript, bounded by message count and bytes, each text cut with flags, tool
//! messages optional, secrets redacted before it leaves the agent (HIS-1..HIS-5).

use a2a_core::error::A2aError;
use a2a_core::sessions::{self as s, History, HistoryMessage, Role};

use super::policy::Requester;
use super::registry::{invalid, unknown};
use super::{Sessions, store_error};

/// The bounds of a history read (HIS-2, HIS-3).
#[derive(Debug, Clone)]
pub struct HistoryQuery {
    /// Messages from the end, 1–1000 (default 50).
    pub limit: usize,
    /// Byte cap on the JSON of `messages` (default and at most 80 KiB).
    pub max_bytes: usize,
    /// Keep `tool` messages.
    pub include_tools: bool,
}

impl Default for HistoryQuery {
    fn default() -> Self {
        HistoryQuery { limit: s::HISTORY_DEFAULT_LIMIT, max_bytes: s::HISTORY_MAX_BYTES, include_tools: false }
    }
}

impl HistoryQuery {
    /// Checks the bounds against the agent's settings: `limit` 1 to `history_max_limit` (default
    /// `history_default_limit`); `max_bytes` at least 1, lowered to `history_max_bytes`.
    pub fn checked(
        settings: &super::SessionSettings,
        limit: Option<usize>,
        max_bytes: Option<usize>,
        include_tools: bool,
    ) -> Result<Self, A2aError> {
        let max_limit = settings.limits.history_max_limit.min(s::HISTORY_MAX_LIMIT);
        let limit = limit.unwrap_or(settings.limits.history_default_limit.min(max_limit));
        if !(1..=max_limit).contains(&limit) {
            return Err(invalid("limit", format!("limit is 1 to {max_limit} (got {limit})")));
        }
        let cap = settings.limits.history_max_bytes.min(s::HISTORY_MAX_BYTES);
        let max_bytes = max_bytes.unwrap_or(cap);
        if max_bytes == 0 {
            return Err(invalid("max_bytes", "max_bytes must be at least 1".into()));
        }
        Ok(HistoryQuery { limit, max_bytes: max_bytes.min(cap), include_tools })
    }
}

/// Bounds and redacts a transcript (HIS-2..HIS-4).
pub fn bound(session: String, messages: Vec<HistoryMessage>, q: &HistoryQuery) -> History {
    let mut redacted = 0usize;
    let kept: Vec<HistoryMessage> = messages.into_iter().filter(|m| q.include_tools || m.role != Role::Tool).collect();
    let truncated = kept.len() > q.limit;
    let start = kept.len().saturating_sub(q.limit);
    let mut out: Vec<HistoryMessage> = kept
        .into_iter()
        .skip(start)
        .map(|mut m| {
            let (text, n) = s::redact(&m.text);
            redacted += n;
            let (text, cut, original) = s::truncate_chars(&text, s::HISTORY_TEXT_CHARS);
            m.text = text;
            m.truncated = cut;
            m.original_chars = cut.then_some(original);
            m
        })
        .collect();
    let mut bytes_capped = false;
    let size = |ms: &[HistoryMessage]| serde_json::to_vec(ms).map_or(0, |v| v.len());
    let mut total = size(&out);
    while total > q.max_bytes && !out.is_empty() {
        let first = size(&out[..1]).saturating_sub(1);
        out.remove(0);
        total = total.saturating_sub(first);
        bytes_capped = true;
    }
    History { session, messages: out, truncated, bytes_capped, redacted }
}

impl Sessions {
    /// HIS-1: the transcript of session `key` here, for a requester that may see it (POL-1, POL-2).
    pub async fn history(&self, requester: &Requester, key: &str, q: &HistoryQuery) -> Result<History, A2aError> {
        let address = self.address(key).map_err(|_| unknown(key))?;
        let rec = self.lookup(&address.to_string()).await?.ok_or_else(|| unknown(key))?;
        // An ended session's transcript stays readable for the retention (SES-7), a stale one's is not.
        let readable = rec.session.ended_at.is_some() || self.is_live(&rec);
        if !readable || !self.visible(requester, &rec).await {
            return Err(unknown(key));
        }
        // One more than the page: whether older messages were left out (`truncated`).
        let messages = self
            .store
            .recent_messages(&address.to_string(), q.limit.saturating_add(1), q.include_tools)
            .await
            .map_err(store_error)?;
        Ok(bound(address.to_string(), messages, q))
    }
}
