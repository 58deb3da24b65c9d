//! Skip tokens, empty replies and repeats (PP-4, PP-5).

use super::*;

/// Characters stripped from both ends of a reply before it is compared with the skip tokens: punctuation, quotes,
/// backticks and markdown emphasis.
fn is_edge_decoration(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '.' | ','
                | ';'
                | ':'
                | '!'
                | '?'
                | '"'
                | '\''
                | '`'
                | '*'
                | '_'
                | '~'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | '«'
                | '»'
                | '“'
                | '”'
                | '‘'
                | '’'
                | '。'
                | '！'
                | '？'
                | '，'
        )
}

/// The skip token `text` is, if any (PP-4 a): white space, surrounding punctuation, quotes, backticks and `*`/`_`
/// emphasis are ignored, and so is case. `NO_REPLY yet, checking` is not a skip token.
pub fn skip_token(text: &str) -> Option<&'static str> {
    // `_` is part of the tokens, so it is only stripped outside them: strip decoration, then compare.
    let core = text.trim_matches(is_edge_decoration);
    if core.len() > 16 {
        return None;
    }
    SKIP_TOKENS.iter().copied().find(|t| core.eq_ignore_ascii_case(t))
}

/// Whether `text` is a skip token (PP-4 a).
pub fn is_skip_token(text: &str) -> bool {
    skip_token(text).is_some()
}

/// Whether `text` is an empty reply (PP-4 b): nothing but white space.
pub fn is_empty_reply(text: &str) -> bool {
    text.trim().is_empty()
}

/// Whether a reply carries nothing to act on: empty or a skip token (PP-5, ANN-2).
pub fn is_silent(text: &str) -> bool {
    is_empty_reply(text) || is_skip_token(text)
}

/// Whether two replies are the same for the repeat rule (PP-4 c): equal after collapsing white space, ignoring case.
pub fn same_reply(a: &str, b: &str) -> bool {
    let mut wa = a.split_whitespace();
    let mut wb = b.split_whitespace();
    loop {
        match (wa.next(), wb.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x.to_lowercase() == y.to_lowercase() => {}
            _ => return false,
        }
    }
}

/// Why a ping-pong exchange ended (`Run.ended_by`, SND-10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// A side answered a skip token.
    SkipToken,
    /// A side answered nothing.
    EmptyReply,
    /// A side repeated its previous reply or the message it was given.
    Repeat,
    /// The last allowed turn was done.
    MaxTurns,
    /// The requester's session could not be reached for turns.
    NotReachable,
    /// The requester asked for no reply, or no ping-pong (`reply: false`, `max_turns: 0`, no `from`).
    ReplyNotWanted,
    /// A turn failed.
    Error,
    /// The run's deadline passed.
    Timeout,
}

/// What ends an exchange after a reply, given the reply, the same side's previous reply and the message that side was
/// given (PP-4 a–c); `None` when the exchange may go on.
pub fn ends_exchange(reply: &str, previous_same_side: Option<&str>, given: &str) -> Option<EndedBy> {
    if is_empty_reply(reply) {
        return Some(EndedBy::EmptyReply);
    }
    if is_skip_token(reply) {
        return Some(EndedBy::SkipToken);
    }
    if previous_same_side.is_some_and(|p| same_reply(p, reply)) || same_reply(given, reply) {
        return Some(EndedBy::Repeat);
    }
    None
}
