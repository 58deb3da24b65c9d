//! The local tools: `keygen`, `key check`, `schema fix`, `capability lint|convert`.

use std::io::{Read, Write};
use std::path::Path;

use a2a_core::capability::yaml;
use a2a_core::did::{Did, DidDocument, ResolveOptions};
use a2a_core::keys::{self, SigningKey};
use a2a_core::schema_rules;
use serde_json::{Value, json};

use super::output::Output;

fn read_text(path: &Path) -> Result<String, String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| format!("cannot read stdin: {e}"))?;
        return Ok(s);
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write_file(path: &Path, contents: &[u8], private: bool) -> Result<(), String> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut f = o.open(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(contents).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `a2a keygen`: a fresh P-256 key (`key.pem`, PKCS#8, mode 0600) and the DID document (`did.json`) to publish.
pub(crate) fn keygen(out: &Output, did: Option<&str>, key_id: &str, dir: &Path, force: bool) -> i32 {
    let fail = |msg: String| {
        out.failure("invalid_input", &msg, &[]);
        2
    };
    let Some(did) = did else {
        return fail(
            "keygen needs --did: the did:web DID the key belongs to (e.g. --did did:web:caller.example.com)".into(),
        );
    };
    let did = match Did::parse(did) {
        Ok(d) => d,
        Err(e) => return fail(format!("--did {did:?}: {e}")),
    };
    let key = match SigningKey::generate() {
        Ok(k) => k,
        Err(e) => return fail(format!("cannot generate a key: {e}")),
    };
    let doc = match DidDocument::try_generate(&did, &[(key_id.to_owned(), key.verifying_key().to_jwk())]) {
        Ok(d) => d,
        Err(e) => return fail(format!("--key-id {key_id:?}: {e}")),
    };
    let (key_path, doc_path) = (dir.join("key.pem"), dir.join("did.json"));
    for p in [&key_path, &doc_path] {
        if p.exists() && !force {
            return fail(format!("{} exists; pass --force to overwrite it", p.display()));
        }
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        return fail(format!("cannot create {}: {e}", dir.display()));
    }
    let pem = match key.to_pkcs8_pem() {
        Ok(p) => p,
        Err(e) => return fail(format!("cannot encode the key: {e}")),
    };
    let doc_json = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    if let Err(e) =
        write_file(&key_path, pem.as_bytes(), true).and_then(|()| write_file(&doc_path, doc_json.as_bytes(), false))
    {
        return fail(e);
    }
    let url = did.document_url(&ResolveOptions::default()).map(|u| u.to_string()).unwrap_or_default();
    let thumbprint = key.verifying_key().thumbprint();
    if out.json {
        out.json_doc(&json!({"did": did.as_str(), "key_id": key_id, "kid": format!("{did}#{key_id}"),
            "key_file": key_path.display().to_string(), "did_document": doc_path.display().to_string(),
            "publish_at": url, "thumbprint": thumbprint}));
    } else {
        out.line(format!("key          {} (ECDSA P-256, PKCS#8; keep it secret)", key_path.display()));
        out.line(format!("DID document {}", doc_path.display()));
        out.line(format!("kid          {did}#{key_id}"));
        out.line(format!("thumbprint   {thumbprint}"));
        out.line(format!("publish the DID document at {url}"));
        out.line(format!("then sign with: a2a --did {did} --key {} --key-id {key_id} ...", key_path.display()));
    }
    0
}

/// `a2a key check FILE`: exit 0 only for an ECDSA P-256 key (KEY-6).
pub(crate) fn key_check(out: &Output, file: &Path) -> i32 {
    let pem = match read_text(file) {
        Ok(t) => t,
        Err(e) => {
            out.failure("invalid_input", &e, &[]);
            return 2;
        }
    };
    match keys::inspect_pem(&pem) {
        Ok(info) => {
            if out.json {
                out.json_doc(&json!({"file": file.display().to_string(), "valid": true,
                    "kind": match info.kind { keys::KeyKind::Private => "private", keys::KeyKind::Public => "public" },
                    "format": info.format.as_str(), "curve": info.curve, "thumbprint": info.thumbprint,
                    "public_jwk": info.public_jwk}));
            } else {
                out.line(format!("{}: {info}", file.display()));
            }
            0
        }
        Err(e) => {
            out.failure(e.code().as_str(), &format!("{}: {e}", file.display()), &[]);
            1
        }
    }
}

/// `a2a schema fix FILE`: converts `nullable` (SCH-19 to SCH-21).
pub(crate) fn schema_fix(out: &Output, file: &Path, output: Option<&Path>, in_place: bool, check: bool) -> i32 {
    let text = match read_text(file) {
        Ok(t) => t,
        Err(e) => {
            out.failure("invalid_input", &e, &[]);
            return 2;
        }
    };
    let schema: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            out.failure("invalid_json", &format!("{} is not JSON: {e}", file.display()), &[]);
            return 1;
        }
    };
    let fix = schema_rules::fix_nullable(&schema);
    let fixed = serde_json::to_string_pretty(&fix.schema).unwrap_or_default() + "\n";
    let remaining = schema_rules::check(&fix.schema);
    if out.json {
        out.json_doc(&json!({"schema": fix.schema, "changes": fix.changes, "unconvertible": fix.unconvertible,
            "remaining_violations": remaining}));
    } else {
        for c in &fix.changes {
            out.note(format!("changed {}: {}", if c.path.is_empty() { "(root)" } else { &c.path }, c.message));
        }
        for v in &remaining {
            if v.rule != schema_rules::rules::NULLABLE_NOT_SUPPORTED {
                out.note(format!(
                    "note: {}: {} ({}; not a nullable problem, left as it is)",
                    v.path, v.message, v.rule
                ));
            }
        }
    }
    if !fix.unconvertible.is_empty() {
        let lines: Vec<String> =
            fix.unconvertible.iter().map(|u| format!("{}: {} ({})", u.path, u.message, u.reason)).collect();
        out.failure(
            "unconvertible",
            &format!("{}: {} `nullable` cannot be converted; fix by hand", file.display(), lines.len()),
            &lines,
        );
        return 1;
    }
    if check {
        if fix.changes.is_empty() {
            out.note(format!("{}: no `nullable` to convert", file.display()));
            return 0;
        }
        out.failure(
            "nullable_not_supported",
            &format!(
                "{}: {} change(s) needed; run `a2a schema fix {} --in-place`",
                file.display(),
                fix.changes.len(),
                file.display()
            ),
            &[],
        );
        return 1;
    }
    let target = if in_place { Some(file) } else { output };
    match target {
        Some(p) => {
            if let Err(e) = write_file(p, fixed.as_bytes(), false) {
                out.failure("invalid_input", &e, &[]);
                return 2;
            }
            out.note(format!("wrote {} ({} change(s))", p.display(), fix.changes.len()));
        }
        None if !out.json => out.line(fixed.trim_end()),
        None => {}
    }
    0
}

fn diagnostics_lines(file: &Path, diags: &[yaml::Diagnostic]) -> Vec<String> {
    diags
        .iter()
        .map(|d| match d.position {
            Some(p) => format!("{}:{}: {}", file.display(), p, d.message),
            None => format!("{}: {}", file.display(), d.message),
        })
        .collect()
}

fn diagnostics_json(diags: &[yaml::Diagnostic]) -> Value {
    Value::Array(
        diags
            .iter()
            .map(|d| {
                json!({"line": d.position.map(|p| p.line), "column": d.position.map(|p| p.column),
                       "pointer": d.pointer, "reason": d.reason, "message": d.message})
            })
            .collect(),
    )
}

/// `a2a capability lint FILE`.
pub(crate) fn capability_lint(out: &Output, file: &Path) -> i32 {
    let text = match read_text(file) {
        Ok(t) => t,
        Err(e) => {
            out.failure("invalid_input", &e, &[]);
            return 2;
        }
    };
    match yaml::load(&text) {
        Ok(decls) => {
            if out.json {
                let names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
                out.json_doc(&json!({"file": file.display().to_string(), "valid": true, "capabilities": names, "diagnostics": []}));
            } else {
                let names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
                out.line(format!("{}: {} declaration(s), valid: {}", file.display(), decls.len(), names.join(", ")));
            }
            0
        }
        Err(diags) => {
            if out.json {
                out.json_doc(&json!({"file": file.display().to_string(), "valid": false, "diagnostics": diagnostics_json(&diags)}));
            } else {
                for l in diagnostics_lines(file, &diags) {
                    super::output::write_line(std::io::stderr().lock(), format_args!("{l}"));
                }
                super::output::write_line(
                    std::io::stderr().lock(),
                    format_args!("a2a: {}: {} problem(s)", file.display(), diags.len()),
                );
            }
            1
        }
    }
}

/// `a2a capability convert FILE`.
pub(crate) fn capability_convert(out: &Output, file: &Path, output: Option<&Path>) -> i32 {
    let text = match read_text(file) {
        Ok(t) => t,
        Err(e) => {
            out.failure("invalid_input", &e, &[]);
            return 2;
        }
    };
    match yaml::convert(&text) {
        Ok(v) => {
            let json_text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
            match output {
                Some(p) => {
                    if let Err(e) = write_file(p, json_text.as_bytes(), false) {
                        out.failure("invalid_input", &e, &[]);
                        return 2;
                    }
                    out.note(format!("wrote {}", p.display()));
                }
                None => out.line(json_text.trim_end()),
            }
            0
        }
        Err(diags) => {
            let lines = diagnostics_lines(file, &diags);
            out.failure(
                "invalid_declaration",
                &format!("{}: {} problem(s); nothing converted", file.display(), diags.len()),
                &lines,
            );
            1
        }
    }
}
