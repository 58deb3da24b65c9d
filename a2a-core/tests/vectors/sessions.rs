//! `spec/vectors/sessions.json` against `a2a_core::sessions`.

use a2a_core::sessions::{SessionAddress, WaitChain, ends_exchange, glob_match, redact, skip_token};
use serde_json::{Value, json};

use crate::common::{Verdict, load};

#[test]
fn session_vectors_all_pass() {
    let file = load("sessions");
    let mut failures = Vec::new();
    for (group, t) in file.tests() {
        let kind = group.params.get("type").and_then(Value::as_str).unwrap_or_default();
        let valid = t.result == Verdict::Valid;
        let got: Result<Value, String> = match kind {
            "SkipToken" => {
                let text = t.input.as_str().unwrap_or_default();
                skip_token(text).map(|s| json!(s)).ok_or_else(|| "not a skip token".to_owned())
            }
            "EndsExchange" => {
                let reply = t.input["reply"].as_str().unwrap_or_default();
                let previous = t.input["previous"].as_str();
                let given = t.input["given"].as_str().unwrap_or_default();
                Ok(serde_json::to_value(ends_exchange(reply, previous, given)).unwrap_or_default())
            }
            "SessionAddress" => t
                .input
                .as_str()
                .unwrap_or_default()
                .parse::<SessionAddress>()
                .map(|a| json!({"agent": a.agent(), "key": a.key()}))
                .map_err(|e| e.to_string()),
            "Glob" => {
                let (p, s) =
                    (t.input["pattern"].as_str().unwrap_or_default(), t.input["text"].as_str().unwrap_or_default());
                if glob_match(p, s) { Ok(Value::Null) } else { Err("no match".to_owned()) }
            }
            "WaitChain" => WaitChain::parse(t.input["chain"].as_str().unwrap_or_default())
                .map_err(|e| e.to_string())
                .and_then(|chain| {
                    let target: SessionAddress = t.input["target"]
                        .as_str()
                        .unwrap_or_default()
                        .parse()
                        .map_err(|e: a2a_core::sessions::SessionError| e.to_string())?;
                    Ok(serde_json::to_value(chain.cycle_to(&target)).unwrap_or_default())
                }),
            "Redact" => {
                let (text, n) = redact(t.input.as_str().unwrap_or_default());
                Ok(json!({"text": text, "redacted": n}))
            }
            other => Err(format!("unknown group type {other}")),
        };
        let problem = match (valid, got) {
            (true, Ok(v)) => match &t.expected {
                Some(want) if *want != v => Some(format!("expected {want}, got {v}")),
                None if kind == "EndsExchange" || kind == "WaitChain" => {
                    (!v.is_null()).then(|| format!("expected null, got {v}"))
                }
                _ => None,
            },
            (true, Err(e)) => Some(format!("refused: {e}")),
            (false, Ok(v)) => Some(format!("accepted: {v}")),
            (false, Err(_)) => None,
        };
        if let Some(p) = problem {
            failures.push(format!("tcId {} ({}): {p}", t.tc_id, t.comment));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
