//! History: truncation and redaction (HIS-2, HIS-4).

use super::*;

/// `text` cut to at most `max_chars` characters: `(text, truncated, original_chars)`.
pub fn truncate_chars(text: &str, max_chars: usize) -> (String, bool, usize) {
    let n = text.chars().count();
    if n <= max_chars {
        return (text.to_owned(), false, n);
    }
    (text.chars().take(max_chars).collect(), true, n)
}

/// The text put in place of a secret.
pub const REDACTED: &str = "[REDACTED]";

struct Rule {
    re: regex::Regex,
    /// Whether the `keep` group of the match (e.g. `password=`) stays in front of `[REDACTED]`.
    keep_prefix: bool,
}

static REDACTION_RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |re: &str, keep_prefix: bool| Rule {
        // The patterns are constants, compiled (and so checked) by the tests of this module.
        re: regex::Regex::new(re).expect("redaction patterns are valid regular expressions"),
        keep_prefix,
    };
    vec![
        // PEM private keys, whole blocks.
        rule(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----", false),
        // Authorization header values (any scheme), up to the end of the line.
        rule(r"(?i)(?P<keep>\bauthorization\s*[:=]\s*)[^\r\n]+", true),
        // Bearer tokens anywhere.
        rule(r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9\-._~+/]+=*", true),
        // JWTs / compact JWS.
        rule(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*", false),
        // API keys of common shapes: OpenAI-style, AWS access key ids, GitHub tokens, Slack tokens.
        rule(r"\bsk-[A-Za-z0-9_-]{16,}", false),
        rule(r"\bAKIA[0-9A-Z]{16}\b", false),
        rule(r"\bgh[pousr]_[A-Za-z0-9]{20,}", false),
        rule(r"\bxox[abprs]-[A-Za-z0-9-]{10,}", false),
        // Assignments: password=..., "api_key": "...", token: ...
        rule(
            r#"(?i)(?P<keep>\b(?:password|passwd|pwd|secret|client_secret|token|access_token|refresh_token|api[_-]?key)\b["']?\s*[:=]\s*)(?P<val>"[^"]*"|'[^']*'|[^\s,;&]+)"#,
            true,
        ),
    ]
});

/// `text` with its secrets replaced by `[REDACTED]` (HIS-4), and how many were replaced.
pub fn redact(text: &str) -> (String, usize) {
    let mut out = std::borrow::Cow::Borrowed(text);
    let mut count = 0usize;
    for rule in REDACTION_RULES.iter() {
        if !rule.re.is_match(&out) {
            continue;
        }
        let replaced = rule
            .re
            .replace_all(&out, |caps: &regex::Captures<'_>| {
                let m = caps.get(0).map_or("", |m| m.as_str());
                if m.contains(REDACTED) {
                    return m.to_owned();
                }
                count += 1;
                let keep = if rule.keep_prefix { caps.name("keep").map_or("", |k| k.as_str()) } else { "" };
                // A quoted value keeps its quotes, so that redacted JSON stays JSON.
                let quote =
                    caps.name("val").and_then(|v| v.as_str().chars().next()).filter(|c| *c == '"' || *c == '\'');
                match quote {
                    Some(q) => format!("{keep}{q}{REDACTED}{q}"),
                    None => format!("{keep}{REDACTED}"),
                }
            })
            .into_owned();
        out = std::borrow::Cow::Owned(replaced);
    }
    (out.into_owned(), count)
}
