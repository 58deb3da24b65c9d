//! The caller the suite signs as (`A2A-Signature`, spec §9.5): a did:web DID and its P-256 key, given with
//! `--identity KEYFILE --did DID` or made up by `--serve-did` (see [`crate::didhost`]).
//!
//! Besides correct signatures, this module writes the wrong ones the checks need: tokens with other headers, DER
//! signatures, the "high S" twin of a signature (JWS-4).

use a2a_core::did::Did;
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::jws::{base64url_decode, base64url_encode};
use a2a_core::keys::SigningKey;
use sha2::{Digest as _, Sha256};

use crate::http::Req;

/// A DID and the key that signs for it.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The did:web DID (`A2A-Sender-ID` and `iss`).
    pub did: String,
    /// The key id: the fragment of the verification method in the DID document (`kid` = `<did>#<key_id>`).
    pub key_id: String,
    /// The private key.
    pub key: SigningKey,
}

impl Identity {
    /// Loads a PEM key file (PKCS#8 `PRIVATE KEY` or SEC 1 `EC PRIVATE KEY`, P-256 only) for `did`.
    pub fn load(key_file: &std::path::Path, did: &str, key_id: &str) -> Result<Identity, String> {
        let pem = std::fs::read_to_string(key_file).map_err(|e| format!("cannot read {}: {e}", key_file.display()))?;
        let key = SigningKey::from_pem(&pem).map_err(|e| format!("{}: {e}", key_file.display()))?;
        Did::parse(did).map_err(|e| format!("--did {did:?}: {e}"))?;
        if !integrity::is_valid_key_id(key_id) {
            return Err(format!("--key-id {key_id:?} must be 1-128 characters of A-Z a-z 0-9 . _ ~ -"));
        }
        Ok(Identity { did: did.to_owned(), key_id: key_id.to_owned(), key })
    }

    /// A fresh key for `did`.
    pub fn generate(did: &str, key_id: &str) -> Result<Identity, String> {
        let key = SigningKey::generate().map_err(|e| e.to_string())?;
        Ok(Identity { did: did.to_owned(), key_id: key_id.to_owned(), key })
    }

    /// The `kid` of this identity's signatures.
    pub fn kid(&self) -> String {
        format!("{}#{}", self.did, self.key_id)
    }
}

/// Unix time in seconds.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Signs `req` as its [`crate::http::Signing`] says (if it has one): builds the claims from the request as it will be
/// sent, lets the check edit them, writes the token, sets `A2A-Signature`, and applies the check's after-signing edit.
pub fn apply_signing(req: &mut Req, agent_did: &str) -> Result<(), String> {
    let Some(signing) = req.signing.take() else { return Ok(()) };
    let id = signing.identity.clone();
    let audience = signing.audience.clone().unwrap_or_else(|| agent_did.to_owned());
    let target = req.target();
    let body = req.body.clone().unwrap_or_default();
    let mut claims = {
        let headers: Vec<(&str, &str)> = req.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let parts = MessageParts { method: &req.method, target: &target, headers: &headers, body: &body, status: None };
        let build =
            |coverage| integrity::build_claims(&id.key_id, &id.did, &audience, coverage, &parts, unix_now(), 60);
        match build(signing.coverage) {
            Ok(c) => c,
            // A payload_hash signature over a body that is not JSON (JCS-11 checks): the digest of the raw bytes stands
            // in; the receiver must refuse the body before it compares digests.
            Err(_) if signing.coverage == Coverage::PayloadHash => {
                let mut c = build(Coverage::HeaderOnly).map_err(|e| format!("cannot sign: {e}"))?;
                c.message_integrity.coverage = Coverage::PayloadHash;
                c.message_integrity.body = Some(base64url_encode(Sha256::digest(&body)));
                c
            }
            Err(e) => return Err(format!("cannot sign the request: {e}")),
        }
    };
    if let Some(edit) = signing.edit_claims {
        edit(&mut claims);
    }
    let token = match signing.make_token {
        Some(make) => make(&id, &claims),
        None => low_s(&integrity::sign_claims(&id.key, &claims).map_err(|e| format!("cannot sign the request: {e}"))?),
    };
    req.set_header("a2a-signature", token);
    if let Some(after) = signing.after {
        after(req);
    }
    Ok(())
}

/// A compact JWS over exactly these header and claims bytes (which need not be canonical, or even what `a2a-core`
/// would accept to write), signed ES256 with `key`.
pub fn raw_token(key: &SigningKey, header: &[u8], claims: &[u8]) -> String {
    let mut token = base64url_encode(header);
    token.push('.');
    token.push_str(&base64url_encode(claims));
    let sig = key.sign(token.as_bytes()).map(|s| s.to_vec()).unwrap_or_default();
    token.push('.');
    token.push_str(&base64url_encode(sig));
    low_s(&token)
}

/// The canonical A2A protected header for an identity.
pub fn a2a_header(id: &Identity) -> serde_json::Value {
    serde_json::json!({"alg": "ES256", "kid": id.kid(), "typ": integrity::TYP})
}

/// The order of the P-256 group, big-endian.
const P256_N: [u8; 32] = [
    0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xBC, 0xE6, 0xFA,
    0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
];

fn split_token(token: &str) -> Option<(&str, Vec<u8>)> {
    let (input, sig) = token.rsplit_once('.')?;
    let sig = base64url_decode(sig).ok()?;
    (sig.len() == 64).then_some((input, sig))
}

/// The other valid signature of the same token: `(r, n - s)` instead of `(r, s)` (JWS-4: both verify).
pub fn twin_signature(token: &str) -> Option<String> {
    let (input, sig) = split_token(token)?;
    let mut s = [0u8; 32];
    s.copy_from_slice(&sig[32..]);
    // n - s, big-endian, with borrow.
    let mut out = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let mut d = i16::from(P256_N[i]) - i16::from(s[i]) - borrow;
        borrow = if d < 0 {
            d += 256;
            1
        } else {
            0
        };
        out[i] = d as u8;
    }
    let mut twin = sig[..32].to_vec();
    twin.extend_from_slice(&out);
    Some(format!("{input}.{}", base64url_encode(twin)))
}

/// Whether a token's 64-byte signature has `s` above `n/2` ("high S").
pub fn is_high_s(token: &str) -> bool {
    // n/2 rounded down: s > n/2 exactly when 2s > n, i.e. when n - s < s.
    split_token(token).is_some_and(|(_, sig)| {
        let twin = twin_signature(token).and_then(|t| split_token(&t).map(|(_, s)| s));
        twin.is_some_and(|t| t[32..] < sig[32..])
    })
}

/// The token with its signature in the low-S form (`s <= n/2`). Every signature the suite sends is written this
/// way, except where a check sends the high-S twin on purpose (JWS-4), so that an agent refusing high S fails only
/// the checks about high S, never at random elsewhere.
pub fn low_s(token: &str) -> String {
    if is_high_s(token) { twin_signature(token).unwrap_or_else(|| token.to_owned()) } else { token.to_owned() }
}

/// The token with its signature in the high-S form (`s > n/2`), the twin of the low-S one (JWS-4).
pub fn high_s(token: &str) -> String {
    if is_high_s(token) { token.to_owned() } else { twin_signature(token).unwrap_or_else(|| token.to_owned()) }
}

/// The same token with its signature in ASN.1 DER (`SEQUENCE { INTEGER r, INTEGER s }`), which JWS-1 forbids.
pub fn der_signature(token: &str) -> Option<String> {
    let (input, sig) = split_token(token)?;
    fn integer(bytes: &[u8]) -> Vec<u8> {
        let trimmed: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
        let mut v = if trimmed.is_empty() { vec![0] } else { trimmed };
        if v[0] & 0x80 != 0 {
            v.insert(0, 0);
        }
        let mut out = vec![0x02, v.len() as u8];
        out.extend(v);
        out
    }
    let mut body = integer(&sig[..32]);
    body.extend(integer(&sig[32..]));
    let mut der = vec![0x30, body.len() as u8];
    der.extend(body);
    Some(format!("{input}.{}", base64url_encode(der)))
}

/// The same token with one bit of its signature flipped.
pub fn corrupt_signature(token: &str) -> Option<String> {
    let (input, mut sig) = split_token(token)?;
    sig[10] ^= 0x01;
    Some(format!("{input}.{}", base64url_encode(sig)))
}

/// Claims shaped as the seed's "Python recipe" would hash a body (JCS-23, INT-12): this returns the recipe's bytes
/// for the suite's own fixed probe body, computed by hand from the recipe's rules (`ensure_ascii`, keys sorted by code
/// point, Python float spelling). Only used with [`PYTHON_RECIPE_BODY`].
pub const PYTHON_RECIPE_BODY: &str = r#"{"title":"Zoë","weight":1e-7,"ratio":100.0}"#;
/// `json.dumps(json.loads(PYTHON_RECIPE_BODY), sort_keys=True, separators=(',', ':'))` as Python 3 writes it.
pub const PYTHON_RECIPE_OUTPUT: &str = r#"{"ratio":100.0,"title":"Zo\u00eb","weight":1e-07}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twin_signature_verifies_and_differs() {
        let key = SigningKey::generate().unwrap_or_else(|e| panic!("{e}"));
        let token = raw_token(&key, br#"{"alg":"ES256"}"#, br#"{"a":1}"#);
        let twin = twin_signature(&token).unwrap_or_default();
        assert_ne!(token, twin);
        let (input, sig) = split_token(&twin).unwrap_or_else(|| panic!("64-byte signature"));
        assert!(key.verifying_key().verify(input.as_bytes(), &sig).is_ok());
        assert_eq!(twin_signature(&twin).as_deref(), Some(token.as_str()));
    }

    #[test]
    fn low_and_high_s_forms_are_twins() {
        let key = SigningKey::generate().unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..16 {
            let token = raw_token(&key, br#"{"alg":"ES256"}"#, br#"{"a":1}"#);
            assert!(!is_high_s(&token), "raw_token writes low S");
            let high = high_s(&token);
            assert!(is_high_s(&high));
            assert_eq!(low_s(&high), token);
            let (input, sig) = split_token(&high).unwrap_or_else(|| panic!("64-byte signature"));
            assert!(key.verifying_key().verify(input.as_bytes(), &sig).is_ok(), "the high-S twin verifies");
        }
    }

    #[test]
    fn der_signature_is_not_64_bytes() {
        let key = SigningKey::generate().unwrap_or_else(|e| panic!("{e}"));
        let token = raw_token(&key, br#"{"alg":"ES256"}"#, br#"{"a":1}"#);
        let der = der_signature(&token).unwrap_or_default();
        let sig = base64url_decode(der.rsplit('.').next().unwrap_or("")).unwrap_or_default();
        assert_eq!(sig[0], 0x30);
        assert!(sig.len() >= 8 && sig.len() != 64 && sig.len() <= 72, "{}", sig.len());
    }

    #[test]
    fn python_recipe_bytes_differ_from_the_canonical_form() {
        let canonical = a2a_core::canonical::canonicalize(PYTHON_RECIPE_BODY.as_bytes()).unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&canonical), r#"{"ratio":100,"title":"Zoë","weight":1e-7}"#);
        assert_ne!(canonical, PYTHON_RECIPE_OUTPUT.as_bytes());
    }
}
