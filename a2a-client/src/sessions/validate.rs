//! The checks a send passes before it leaves the client (§17.3 table, SND-1, SND-2), and attachments made from bytes
//! or files: a message over a bound is refused here with a typed error instead of a round trip that ends in `413`.

use std::path::Path;

use a2a_core::sessions::{
    Attachment, ContextMode, MAX_ATTACHMENTS, MAX_TEXT_CHARS, MAX_TURNS_CAP, SendRequest, validate_session_key,
};
use base64::Engine as _;

use crate::error::ClientError;

/// The decoded size of one attachment that this client checks by default (SND-2: this implementation's
/// `limits.max_attachment_bytes`, 256 KiB); [`super::Sessions::max_attachment_bytes`] sets another.
pub const DEFAULT_MAX_ATTACHMENT_BYTES: usize = 256 * 1024;

/// The body bound used when the agent's capabilities document states none (the server's default, 1 MiB).
pub(crate) const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// An attachment of `bytes` (SND-2), checked against `max_bytes`.
pub fn attachment_from_bytes(
    name: &str,
    media_type: &str,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<Attachment, ClientError> {
    if bytes.len() > max_bytes {
        return Err(ClientError::TooLarge {
            what: format!("attachment {name:?}"),
            limit: max_bytes as u64,
            actual: bytes.len() as u64,
        });
    }
    check_media_type(name, media_type)?;
    Ok(Attachment { name: name.to_owned(), media_type: media_type.to_owned(), data: B64.encode(bytes) })
}

/// An attachment of the file at `path` (its media type from the extension, `application/octet-stream` when
/// unknown), checked against `max_bytes` before the file is read whole.
pub fn attachment_from_file(path: &Path, max_bytes: usize) -> Result<Attachment, ClientError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| ClientError::invalid(format!("attachment {shown}: {e}")))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("attachment").to_owned();
    if meta.len() > max_bytes as u64 {
        return Err(ClientError::TooLarge {
            what: format!("attachment {name:?}"),
            limit: max_bytes as u64,
            actual: meta.len(),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| ClientError::invalid(format!("attachment {shown}: {e}")))?;
    attachment_from_bytes(&name, media_type_of(&name), &bytes, max_bytes)
}

/// The media type of a file name, by its extension.
fn media_type_of(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "json" => "application/json",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        _ => "application/octet-stream",
    }
}

fn check_media_type(name: &str, media_type: &str) -> Result<(), ClientError> {
    let ok = media_type.split_once('/').is_some_and(|(t, s)| {
        let tok = |x: &str| !x.is_empty() && x.chars().all(|c| c.is_ascii_alphanumeric() || "!#$&^_.+-".contains(c));
        tok(t) && tok(s)
    });
    if ok {
        Ok(())
    } else {
        Err(ClientError::invalid(format!(
            "attachment {name:?}: media type {media_type:?} is not type/subtype (e.g. image/png)"
        )))
    }
}

fn member(name: &str, why: impl std::fmt::Display) -> ClientError {
    ClientError::invalid(format!("send: `{name}` {why}"))
}

/// Checks a send against the table of §17.3 and the bounds of SND-2, as the agent would: `body_len` is the size of
/// the request body, `max_attachment_bytes` the decoded size allowed for each attachment, `max_body_bytes` the body
/// bound.
pub fn check_send(
    request: &SendRequest,
    max_attachment_bytes: usize,
    max_body_bytes: usize,
    body_len: usize,
) -> Result<(), ClientError> {
    match (&request.target, &request.target_label) {
        (None, None) => return Err(member("target", "is required (or `target_label`)")),
        (Some(_), Some(_)) => return Err(member("target_label", "cannot be given with `target`")),
        (Some(t), None) => validate_session_key(t).map_err(|e| member("target", e))?,
        (None, Some(l)) if l.is_empty() => return Err(member("target_label", "is empty")),
        (None, Some(_)) => {}
    }
    let n = request.text.chars().count();
    if n == 0 || n > MAX_TEXT_CHARS {
        return Err(member("text", format!("is 1 to {MAX_TEXT_CHARS} characters (got {n})")));
    }
    if let Some(f) = &request.from {
        validate_session_key(f).map_err(|e| member("from", e))?;
    }
    if let Some(e) = &request.from_endpoint {
        crate::endpoint::Endpoint::parse(e).map_err(|e| member("from_endpoint", e))?;
    }
    if request.run_timeout_ms == Some(0) {
        return Err(member("run_timeout_ms", "must be more than 0"));
    }
    if let Some(t) = request.max_turns
        && t > MAX_TURNS_CAP
    {
        return Err(member("max_turns", format!("is 0 to {MAX_TURNS_CAP} (got {t})")));
    }
    if let Some(p) = request.priority
        && p > 9
    {
        return Err(member("priority", format!("is 0 to 9 (got {p})")));
    }
    if let Some(t) = &request.trace_id
        && !(1..=128).contains(&t.chars().count())
    {
        return Err(member("trace_id", "is 1 to 128 characters"));
    }
    if request.max_tokens == Some(0) {
        return Err(member("max_tokens", "must be more than 0"));
    }
    if !request.context.is_empty() && request.context_mode != Some(ContextMode::Full) {
        return Err(member("context", "is only sent with `context_mode: full`"));
    }
    if request.context.len() > 50 {
        return Err(member("context", format!("holds at most 50 messages (got {})", request.context.len())));
    }
    if request.attachments.len() > MAX_ATTACHMENTS {
        return Err(member(
            "attachments",
            format!("holds at most {MAX_ATTACHMENTS} (got {})", request.attachments.len()),
        ));
    }
    for a in &request.attachments {
        check_media_type(&a.name, &a.media_type)?;
        let bytes = B64
            .decode(&a.data)
            .map_err(|e| ClientError::invalid(format!("attachment {:?}: `data` is not valid base64 ({e})", a.name)))?;
        if bytes.len() > max_attachment_bytes {
            return Err(ClientError::TooLarge {
                what: format!("attachment {:?}", a.name),
                limit: max_attachment_bytes as u64,
                actual: bytes.len() as u64,
            });
        }
    }
    if body_len > max_body_bytes {
        return Err(ClientError::TooLarge {
            what: "the send request body".into(),
            limit: max_body_bytes as u64,
            actual: body_len as u64,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::message;

    fn check(r: &SendRequest) -> Result<(), ClientError> {
        check_send(r, 1024, 1 << 20, 100)
    }

    #[test]
    fn a_plain_send_passes_and_every_bad_member_is_named() {
        assert!(check(&message("bonus-desk", "What is the bonus?")).is_ok());
        type Breaker = Box<dyn Fn(&mut SendRequest)>;
        let cases: Vec<(&str, Breaker)> = vec![
            ("target", Box::new(|r| r.target = None)),
            ("target_label", Box::new(|r| r.target_label = Some("x".into()))),
            ("target", Box::new(|r| r.target = Some("has space".into()))),
            ("text", Box::new(|r| r.text = String::new())),
            ("text", Box::new(|r| r.text = "x".repeat(MAX_TEXT_CHARS + 1))),
            ("from", Box::new(|r| r.from = Some("a/b".into()))),
            ("from_endpoint", Box::new(|r| r.from_endpoint = Some("ftp://x".into()))),
            ("run_timeout_ms", Box::new(|r| r.run_timeout_ms = Some(0))),
            ("max_turns", Box::new(|r| r.max_turns = Some(21))),
            ("priority", Box::new(|r| r.priority = Some(10))),
            ("trace_id", Box::new(|r| r.trace_id = Some(String::new()))),
            ("max_tokens", Box::new(|r| r.max_tokens = Some(0))),
            (
                "context",
                Box::new(|r| {
                    r.context = vec![a2a_core::sessions::ContextMessage {
                        role: a2a_core::sessions::Role::User,
                        text: "x".into(),
                    }]
                }),
            ),
        ];
        for (name, f) in cases {
            let mut r = message("bonus-desk", "hi");
            f(&mut r);
            let e = check(&r).expect_err(name);
            assert!(e.to_string().contains(&format!("`{name}`")), "{name}: {e}");
        }
    }

    #[test]
    fn attachments_are_bounded_in_count_size_encoding_and_type() {
        let ok = attachment_from_bytes("a.png", "image/png", &[0u8; 1024], 1024).expect("at the limit");
        let mut r = message("desk", "see attached");
        r.attachments = vec![ok.clone()];
        assert!(check(&r).is_ok());

        let e = attachment_from_bytes("big.png", "image/png", &[0u8; 1025], 1024).expect_err("over");
        assert!(matches!(e, ClientError::TooLarge { limit: 1024, actual: 1025, .. }), "{e}");
        assert_eq!(e.code(), "payload_too_large");

        r.attachments = vec![ok.clone(); MAX_ATTACHMENTS + 1];
        assert!(check(&r).expect_err("9").to_string().contains("at most 8"));

        r.attachments = vec![Attachment { data: B64.encode([0u8; 2000]), ..ok.clone() }];
        assert!(matches!(check(&r), Err(ClientError::TooLarge { actual: 2000, .. })));

        r.attachments = vec![Attachment { data: "not base64!".into(), ..ok.clone() }];
        assert!(check(&r).expect_err("b64").to_string().contains("base64"));

        r.attachments = vec![Attachment { media_type: "png".into(), ..ok }];
        assert!(check(&r).expect_err("type").to_string().contains("type/subtype"));
    }

    #[test]
    fn the_whole_body_is_bounded_too() {
        let e = check_send(&message("desk", "hi"), 1024, 500, 501).expect_err("over the body bound");
        assert!(matches!(e, ClientError::TooLarge { limit: 500, actual: 501, .. }), "{e}");
    }

    #[test]
    fn files_are_checked_before_they_are_read() {
        let dir = std::env::temp_dir().join(format!("a2a-attach-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let f = dir.join("payslip.png");
        std::fs::write(&f, [7u8; 300]).expect("write");
        let a = attachment_from_file(&f, 300).expect("fits");
        assert_eq!((a.name.as_str(), a.media_type.as_str()), ("payslip.png", "image/png"));
        assert_eq!(B64.decode(&a.data).expect("b64"), vec![7u8; 300]);
        assert!(matches!(attachment_from_file(&f, 299), Err(ClientError::TooLarge { .. })));
        assert!(attachment_from_file(&dir.join("missing.txt"), 10).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
