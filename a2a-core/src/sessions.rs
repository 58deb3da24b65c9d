//! Sessions and conversations (`spec/PROTOCOL.md` §17): the wire types of the session endpoints, and the rules every
//! party must apply the same way — skip tokens and repeats that end a ping-pong (PP-4), session addresses, the
//! allow-list globs (POL-1), the wait chain that refuses cycles (POL-5), history truncation and secret redaction
//! (HIS-2, HIS-4), and the provenance line a text handler is given (POL-3).
//!
//! ```
//! use a2a_core::sessions::{is_skip_token, same_reply, SessionAddress, WaitChain};
//!
//! // The seed-000 loop: `NO_REPLY` is a skip token however it is dressed.
//! assert!(is_skip_token(" **no_reply.** "));
//! assert!(!is_skip_token("NO_REPLY yet, checking"));
//! assert!(same_reply("The bonus is 5000.", "the  bonus is 5000."));
//!
//! let a: SessionAddress = "did:web:main.example.com#main".parse().unwrap();
//! let chain = WaitChain::parse("did:web:work.example.com#desk").unwrap().with(a.clone()).unwrap();
//! assert!(chain.contains(&a));
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::did::Did;
use crate::error::ErrorObject;

/// The tokens that mean "nothing to say" (PP-4 a): a reply equal to one ends a ping-pong, and an announce answer
/// equal to one publishes nothing.
pub const SKIP_TOKENS: [&str; 4] = ["REPLY_SKIP", "NO_REPLY", "ANNOUNCE_SKIP", "HEARTBEAT_OK"];

/// The default number of ping-pong turns after round one (PP-3).
pub const DEFAULT_MAX_TURNS: u32 = 5;
/// The hard cap on ping-pong turns (PP-3).
pub const MAX_TURNS_CAP: u32 = 20;
/// The longest a send or a run read may wait (SND-3): ten minutes.
pub const MAX_WAIT_MS: u64 = 600_000;
/// The default wait of a blocking ask (SND-3).
pub const DEFAULT_ASK_WAIT_MS: u64 = 60_000;
/// The default time a target has for its round-one reply.
pub const DEFAULT_RUN_TIMEOUT_MS: u64 = 60_000;
/// The longest message text (§17.3).
pub const MAX_TEXT_CHARS: usize = 20_000;
/// The most attachments one send may carry (SND-2).
pub const MAX_ATTACHMENTS: usize = 8;
/// A history message's text is cut to this many characters (HIS-2).
pub const HISTORY_TEXT_CHARS: usize = 4_000;
/// The default and largest byte budget of a history answer (HIS-2).
pub const HISTORY_MAX_BYTES: usize = 80 * 1024;
/// The default number of history messages (HIS-2).
pub const HISTORY_DEFAULT_LIMIT: usize = 50;
/// The largest number of history messages (HIS-2).
pub const HISTORY_MAX_LIMIT: usize = 1_000;
/// A session not refreshed for this long is stale (SES-6).
pub const STALE_AFTER_MS: u64 = 24 * 60 * 60 * 1000;
/// The most entries a wait chain may hold.
pub const MAX_WAIT_CHAIN: usize = 32;
/// The request header carrying the hop count (POL-4).
pub const HOP_HEADER: &str = "A2A-Hop";
/// The request header carrying the wait chain (POL-5).
pub const WAIT_CHAIN_HEADER: &str = "A2A-Wait-Chain";
/// The header of a webhook post naming the event it carries (ANN-5); a retried post carries the same id.
pub const EVENT_ID_HEADER: &str = "A2A-Event-ID";

mod address;
mod allow_list;
mod history;
mod provenance;
mod skip;
mod wait_chain;
mod wire;

pub use address::*;
pub use allow_list::*;
pub use history::*;
pub use provenance::*;
pub use skip::*;
pub use wait_chain::*;
pub use wire::*;

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn list_queries_carry_every_filter_encoded() {
        let q = ListQuery {
            kinds: vec![SessionKind::Main, SessionKind::Spawn],
            label: Some("work assistant".into()),
            agent: Some("did:web:work.example.com".into()),
            active_minutes: Some(30),
            search: Some("bonus&pay".into()),
            limit: Some(10),
            offset: Some(20),
            include_self: true,
            include_ended: true,
        };
        assert_eq!(
            q.to_query(),
            "kind=main%2Cspawn&label=work+assistant&agent=did%3Aweb%3Awork.example.com&active_minutes=30&\
             search=bonus%26pay&limit=10&offset=20&include_self=true&include_ended=true"
        );
        assert_eq!(ListQuery::default().to_query(), "");
    }

    #[test]
    fn a_list_query_reads_back_what_it_writes_and_refuses_bad_parameters() {
        let q = ListQuery {
            kinds: vec![SessionKind::Group, SessionKind::Other],
            label: Some("a b&c".into()),
            agent: Some("did:web:a.example.com".into()),
            active_minutes: Some(5),
            search: Some("ünï".into()),
            limit: Some(200),
            offset: Some(3),
            include_self: true,
            include_ended: false,
        };
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(q.to_query().as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        assert_eq!(ListQuery::parse(&pairs), Ok(q));
        assert_eq!(ListQuery::parse(&[]), Ok(ListQuery::default()));
        let one = |k: &str, v: &str| ListQuery::parse(&[(k.to_owned(), v.to_owned())]);
        assert_eq!(one("search", "").map(|q| q.search), Ok(None), "an empty search is no filter");
        assert_eq!(one("include_self", "").map(|q| q.include_self), Ok(true));
        for (k, v) in
            [("limit", "0"), ("limit", "201"), ("offset", "-1"), ("kind", "main,nope"), ("include_ended", "yes")]
        {
            let e = one(k, v).expect_err(v);
            assert_eq!(e.parameter, k, "{e}");
        }
    }
    use proptest::prop_oneof;

    #[test]
    fn skip_tokens_tolerate_case_space_and_decoration() {
        for s in [
            "REPLY_SKIP",
            "no_reply",
            " NO_REPLY\n",
            "**NO_REPLY**",
            "`ANNOUNCE_SKIP`",
            "\"Reply_Skip\".",
            "HEARTBEAT_OK!",
        ] {
            assert!(is_skip_token(s), "{s:?}");
        }
        for s in ["NO_REPLY yet, checking", "REPLY", "NOREPLY", "", "no reply", "REPLY_SKIP REPLY_SKIP"] {
            assert!(!is_skip_token(s), "{s:?}");
        }
    }

    #[test]
    fn globs_match_like_shell_patterns_without_classes() {
        assert!(glob_match("did:web:*.example.com#*", "did:web:a.example.com#main"));
        assert!(!glob_match("did:web:*.example.com#*", "did:web:example.com#main"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(glob_match("*a*a*a*b", "aaaaaaaaaaaaaaaaaaab"));
        assert!(!glob_match("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaa"));
    }

    proptest::proptest! {
        #[test]
        fn rules_never_panic_and_redaction_is_idempotent(
            text in prop_oneof![
                ".{0,300}",
                "(password=|Bearer |Authorization: |sk-|AKIA|eyJ|ghp_|token: |[A-Za-z0-9 \"'=:.,_-]){0,60}",
            ],
            pattern in "[a-z*?#:.]{0,20}",
        ) {
            let _ = skip_token(&text);
            let _ = ends_exchange(&text, Some(&text), "x");
            let _ = glob_match(&pattern, &text);
            let _ = WaitChain::parse(&text);
            let _ = text.parse::<SessionAddress>();
            let (once, _) = redact(&text);
            let (twice, n) = redact(&once);
            proptest::prop_assert_eq!(n, 0, "redacting {:?} twice found more", once);
            proptest::prop_assert_eq!(twice, once);
        }
    }

    #[test]
    fn redaction_replaces_secrets_and_counts_them() {
        let (out, n) = redact("Authorization: Bearer abc.def\npassword=hunter2 and sk-ABCDEFGHIJKLMNOPQRSTUV");
        assert_eq!(n, 3, "{out}");
        assert!(!out.contains("hunter2") && !out.contains("abc.def") && !out.contains("sk-ABC"), "{out}");
        assert_eq!(redact("nothing to see").1, 0);
    }
}
