//! ECDSA P-256 keys (`spec/PROTOCOL.md`, requirements `KEY-*`).
//!
//! The protocol accepts exactly one key type: ECDSA over NIST P-256 (also named secp256r1 and prime256v1), used with
//! SHA-256 (JWS `ES256`). Every other key (RSA, P-384, P-521, secp256k1, Ed25519, ...) is refused with
//! [`KeyError::UnsupportedKeyType`], whose message names what was found.
//!
//! Keys are parsed and validated once, with the `p256` crate (PEM, PKCS#8, SEC1, SPKI, JWK); signing and verification
//! then use a pre-parsed `aws-lc-rs` key held inside the value, so a [`VerifyingKey`] is cheap to clone and fast to use.

use std::fmt;
use std::sync::Arc;

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, ParsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use p256::elliptic_curve::sec1::ToSec1Point as _;
use p256::elliptic_curve::zeroize::Zeroizing;
use p256::pkcs8::der::Decode as _;
use p256::pkcs8::{
    DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _, EncodePublicKey as _, LineEnding,
    ObjectIdentifier, PrivateKeyInfoRef, SubjectPublicKeyInfoRef,
};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::error::ErrorCode;

/// The message every refusal of a foreign key type carries.
pub const ONLY_P256: &str = "only ECDSA P-256 (secp256r1 / prime256v1) keys are accepted";

/// Why a key was refused, or why a signature could not be made or checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key is of another type than ECDSA P-256; `found` names it (e.g. `RSA`, `P-384 (secp384r1)`).
    #[error("unsupported key type {found}: {ONLY_P256}")]
    UnsupportedKeyType {
        /// What the key is, e.g. `RSA`, `Ed25519`, `P-384 (secp384r1)`, `unknown algorithm OID 1.2.3`.
        found: String,
    },
    /// The key file is encrypted with a passphrase.
    #[error(
        "the key is encrypted with a passphrase; decrypt it first (e.g. `openssl pkey -in key.pem -out key.plain.pem`)"
    )]
    Encrypted,
    /// A public key was given where a private key is expected, or the reverse.
    #[error("a {found} key where a {expected} key is expected")]
    WrongKind {
        /// `private` or `public`.
        expected: &'static str,
        /// `private` or `public`.
        found: &'static str,
    },
    /// The input is not a well-formed key.
    #[error("malformed key: {0}")]
    Malformed(String),
    /// A signature does not have the 64 bytes `r || s` that ES256 requires.
    #[error("the signature is {found} bytes; ES256 requires exactly 64 bytes (r || s, not DER)")]
    SignatureLength {
        /// Its length in bytes.
        found: usize,
    },
    /// The signature does not verify with this key.
    #[error("the signature does not verify with this key")]
    SignatureInvalid,
    /// The cryptographic library failed to produce a signature or a key (should not happen).
    #[error("cryptographic failure: {0}")]
    Crypto(&'static str),
}

impl KeyError {
    /// The stable error code of the protocol's error table.
    ///
    /// Every refusal of a key (foreign type, encrypted, malformed, wrong kind) is `unsupported_key_type`: the key cannot
    /// be used to verify an ES256 signature.
    pub fn code(&self) -> ErrorCode {
        match self {
            KeyError::UnsupportedKeyType { .. }
            | KeyError::Encrypted
            | KeyError::WrongKind { .. }
            | KeyError::Malformed(_) => ErrorCode::UNSUPPORTED_KEY_TYPE,
            KeyError::SignatureLength { .. } => ErrorCode::SIGNATURE_MALFORMED,
            KeyError::SignatureInvalid => ErrorCode::SIGNATURE_INVALID,
            KeyError::Crypto(_) => ErrorCode::INTERNAL_ERROR,
        }
    }

    /// A bounded label for logs, metrics and test vectors.
    pub fn reason(&self) -> &'static str {
        match self {
            KeyError::UnsupportedKeyType { .. } => "unsupported_key_type",
            KeyError::Encrypted => "encrypted_key",
            KeyError::WrongKind { .. } => "wrong_key_kind",
            KeyError::Malformed(_) => "malformed_key",
            KeyError::SignatureLength { .. } => "signature_length",
            KeyError::SignatureInvalid => "signature_invalid",
            KeyError::Crypto(_) => "crypto_failure",
        }
    }
}

fn malformed(msg: impl Into<String>) -> KeyError {
    KeyError::Malformed(msg.into())
}

fn unsupported(found: impl Into<String>) -> KeyError {
    KeyError::UnsupportedKeyType { found: found.into() }
}

// ---------------------------------------------------------------------------------------------------------------------
// Verifying key
// ---------------------------------------------------------------------------------------------------------------------

struct VerifyingInner {
    public: p256::PublicKey,
    parsed: ParsedPublicKey,
    x: [u8; 32],
    y: [u8; 32],
}

/// An ECDSA P-256 public key, validated and pre-parsed for fast verification. Cloning is cheap (an `Arc`).
#[derive(Clone)]
pub struct VerifyingKey(Arc<VerifyingInner>);

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyingKey").field("thumbprint", &self.thumbprint()).finish()
    }
}

impl PartialEq for VerifyingKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.x == other.0.x && self.0.y == other.0.y
    }
}

impl Eq for VerifyingKey {}

impl VerifyingKey {
    fn from_public(public: p256::PublicKey) -> Result<Self, KeyError> {
        let point = public.to_sec1_point(false);
        let bytes = point.as_bytes();
        // An uncompressed SEC1 point is 0x04 || x || y.
        let (x, y) = match bytes.get(1..33).zip(bytes.get(33..65)) {
            Some((x, y)) if bytes.len() == 65 => (x, y),
            _ => return Err(malformed("the public key is not a finite P-256 point")),
        };
        let not_finite = || malformed("the public key is not a finite P-256 point");
        let xa = <[u8; 32]>::try_from(x).map_err(|_| not_finite())?;
        let ya = <[u8; 32]>::try_from(y).map_err(|_| not_finite())?;
        let parsed = ParsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, bytes)
            .map_err(|_| malformed("the public key is not a valid P-256 point"))?;
        Ok(VerifyingKey(Arc::new(VerifyingInner { public, parsed, x: xa, y: ya })))
    }

    /// Parses a SEC1-encoded point (uncompressed `04 || x || y` or compressed `02|03 || x`); the point must lie on P-256.
    pub fn from_sec1_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        let public = p256::PublicKey::from_sec1_bytes(bytes)
            .map_err(|_| malformed("not a SEC1-encoded point on P-256 (expected 65 bytes 04||x||y or 33 bytes)"))?;
        Self::from_public(public)
    }

    /// Parses a PEM `PUBLIC KEY` (SubjectPublicKeyInfo). Any other key type is refused, naming what it is; a private key
    /// is refused as [`KeyError::WrongKind`].
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        match parse_pem(pem)? {
            ParsedPem::Public(k) => Ok(k),
            ParsedPem::Private(_, _) => Err(KeyError::WrongKind { expected: "public", found: "private" }),
        }
    }

    /// Parses a public JWK (RFC 7517/7518): `kty` `EC`, `crv` `P-256`, `x` and `y` the base64url (no padding) encodings
    /// of exactly 32 bytes each, and the point must lie on the curve. A JWK carrying `d` is refused (a private key where
    /// a public key is expected). `alg`, when present, must be `ES256`; `use`, when present, must be `sig`.
    pub fn from_jwk(jwk: &Value) -> Result<Self, KeyError> {
        let obj = jwk_object(jwk)?;
        if obj.contains_key("d") {
            return Err(KeyError::WrongKind { expected: "public", found: "private" });
        }
        jwk_public(obj)
    }

    /// The public JWK `{"kty":"EC","crv":"P-256","x":...,"y":...}`.
    pub fn to_jwk(&self) -> Value {
        json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(self.0.x),
            "y": URL_SAFE_NO_PAD.encode(self.0.y),
        })
    }

    /// The PEM `PUBLIC KEY` (SubjectPublicKeyInfo) encoding.
    pub fn to_pem(&self) -> Result<String, KeyError> {
        self.0.public.to_public_key_pem(LineEnding::LF).map_err(|_| KeyError::Crypto("SPKI encoding failed"))
    }

    /// The uncompressed SEC1 encoding `04 || x || y` (65 bytes).
    pub fn to_sec1_bytes(&self) -> [u8; 65] {
        let mut out = [0u8; 65];
        let bytes = std::iter::once(&4u8).chain(self.0.x.iter()).chain(self.0.y.iter());
        for (o, b) in out.iter_mut().zip(bytes) {
            *o = *b;
        }
        out
    }

    /// The RFC 7638 JWK thumbprint: base64url (no padding) of SHA-256 over
    /// `{"crv":"P-256","kty":"EC","x":"<x>","y":"<y>"}`.
    pub fn thumbprint(&self) -> String {
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            URL_SAFE_NO_PAD.encode(self.0.x),
            URL_SAFE_NO_PAD.encode(self.0.y)
        );
        URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
    }

    /// Verifies an ES256 signature (`r || s`, exactly 64 bytes) of `msg`: ECDSA P-256 over SHA-256(`msg`).
    /// A DER-encoded signature is refused with [`KeyError::SignatureLength`].
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), KeyError> {
        if sig.len() != 64 {
            return Err(KeyError::SignatureLength { found: sig.len() });
        }
        self.0.parsed.verify_sig(msg, sig).map_err(|_| KeyError::SignatureInvalid)
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Signing key
// ---------------------------------------------------------------------------------------------------------------------

struct SigningInner {
    secret: p256::SecretKey,
    pair: EcdsaKeyPair,
    public: VerifyingKey,
}

/// An ECDSA P-256 private key. Cloning is cheap (an `Arc`); the secret is zeroed when the last clone is dropped, and
/// `Debug` never shows it.
#[derive(Clone)]
pub struct SigningKey(Arc<SigningInner>);

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey").field("thumbprint", &self.0.public.thumbprint()).finish_non_exhaustive()
    }
}

impl SigningKey {
    fn from_secret(secret: p256::SecretKey) -> Result<Self, KeyError> {
        let public = VerifyingKey::from_public(secret.public_key())?;
        let scalar = Zeroizing::new(secret.to_bytes());
        let pair = EcdsaKeyPair::from_private_key_and_public_key(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            scalar.as_slice(),
            &public.to_sec1_bytes(),
        )
        .map_err(|_| malformed("the private key is not a valid P-256 scalar"))?;
        Ok(SigningKey(Arc::new(SigningInner { secret, pair, public })))
    }

    /// Generates a fresh key from the operating system's random source.
    pub fn generate() -> Result<Self, KeyError> {
        // A uniformly random 256-bit string is a valid scalar (in 1..n) except with probability below 2^-32.
        for _ in 0..16 {
            let mut bytes = Zeroizing::new([0u8; 32]);
            getrandom::fill(bytes.as_mut_slice()).map_err(|_| KeyError::Crypto("the random source failed"))?;
            if let Ok(secret) = p256::SecretKey::from_slice(bytes.as_slice()) {
                return Self::from_secret(secret);
            }
        }
        Err(KeyError::Crypto("the random source keeps producing invalid scalars"))
    }

    /// Builds a key from its 32-byte big-endian private scalar (must be in `1..n`).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        if bytes.len() != 32 {
            return Err(malformed(format!("a P-256 private key is 32 bytes, not {}", bytes.len())));
        }
        let secret = p256::SecretKey::from_slice(bytes)
            .map_err(|_| malformed("the private scalar is zero or not below the group order"))?;
        Self::from_secret(secret)
    }

    /// Parses a PEM private key: SEC1 `EC PRIVATE KEY` or PKCS#8 `PRIVATE KEY` (an `EC PARAMETERS` block before it is
    /// ignored). Encrypted keys are refused with [`KeyError::Encrypted`]; a public key with [`KeyError::WrongKind`]; any
    /// other key type with [`KeyError::UnsupportedKeyType`].
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        match parse_pem(pem)? {
            ParsedPem::Private(k, _) => Ok(k),
            ParsedPem::Public(_) => Err(KeyError::WrongKind { expected: "private", found: "public" }),
        }
    }

    /// Parses a private JWK: `kty` `EC`, `crv` `P-256`, `d`, `x`, `y` (base64url without padding, 32 bytes each); `x`
    /// and `y` must be the public point of `d`.
    pub fn from_jwk(jwk: &Value) -> Result<Self, KeyError> {
        let obj = jwk_object(jwk)?;
        if !obj.contains_key("d") {
            return Err(KeyError::WrongKind { expected: "private", found: "public" });
        }
        let public = jwk_public(obj)?;
        let d = Zeroizing::new(jwk_coordinate(obj, "d")?);
        let key = Self::from_bytes(d.as_slice())?;
        if key.0.public != public {
            return Err(malformed("JWK x/y do not match the public key of d"));
        }
        Ok(key)
    }

    /// The PKCS#8 `PRIVATE KEY` PEM encoding (with the public key).
    pub fn to_pkcs8_pem(&self) -> Result<Zeroizing<String>, KeyError> {
        self.0.secret.to_pkcs8_pem(LineEnding::LF).map_err(|_| KeyError::Crypto("PKCS#8 encoding failed"))
    }

    /// The PKCS#8 DER encoding.
    pub fn to_pkcs8_der(&self) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        let doc = self.0.secret.to_pkcs8_der().map_err(|_| KeyError::Crypto("PKCS#8 encoding failed"))?;
        Ok(Zeroizing::new(doc.as_bytes().to_vec()))
    }

    /// The private JWK `{"kty":"EC","crv":"P-256","x":...,"y":...,"d":...}`. Handle with care: the returned value is
    /// not zeroed on drop.
    pub fn to_jwk(&self) -> Value {
        let mut jwk = self.0.public.to_jwk();
        let d = Zeroizing::new(self.0.secret.to_bytes());
        if let Value::Object(m) = &mut jwk {
            m.insert("d".to_owned(), Value::String(URL_SAFE_NO_PAD.encode(d.as_slice())));
        }
        jwk
    }

    /// The public half.
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.0.public
    }

    /// Signs `msg` with ES256: ECDSA P-256 over SHA-256(`msg`), with a fresh random nonce; returns `r || s` (64 bytes).
    pub fn sign(&self, msg: &[u8]) -> Result<[u8; 64], KeyError> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let sig = self.0.pair.sign(&rng, msg).map_err(|_| KeyError::Crypto("ECDSA signing failed"))?;
        <[u8; 64]>::try_from(sig.as_ref()).map_err(|_| KeyError::Crypto("ECDSA signature is not 64 bytes"))
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// JWK
// ---------------------------------------------------------------------------------------------------------------------

fn jwk_object(jwk: &Value) -> Result<&Map<String, Value>, KeyError> {
    let obj = jwk.as_object().ok_or_else(|| malformed("a JWK must be a JSON object"))?;
    let kty = obj.get("kty").and_then(Value::as_str).ok_or_else(|| malformed("JWK member kty is missing"))?;
    let crv = obj.get("crv").and_then(Value::as_str);
    match (kty, crv) {
        ("EC", Some("P-256")) => {}
        ("EC", Some("P-384")) => return Err(unsupported("P-384 (secp384r1)")),
        ("EC", Some("P-521")) => return Err(unsupported("P-521 (secp521r1)")),
        ("EC", Some("secp256k1")) => return Err(unsupported("secp256k1")),
        ("EC", Some(other)) => return Err(unsupported(format!("EC curve {other:?}"))),
        ("EC", None) => return Err(malformed("JWK member crv is missing")),
        ("RSA", _) => return Err(unsupported("RSA")),
        ("OKP", Some(c)) => return Err(unsupported(c.to_owned())),
        ("OKP", None) => return Err(unsupported("OKP")),
        ("oct", _) => return Err(unsupported("symmetric (oct)")),
        (other, _) => return Err(unsupported(format!("JWK kty {other:?}"))),
    }
    if let Some(alg) = obj.get("alg")
        && alg.as_str() != Some("ES256")
    {
        return Err(malformed(format!("JWK alg is {alg}; a P-256 signing key must have alg ES256 (or none)")));
    }
    if let Some(u) = obj.get("use")
        && u.as_str() != Some("sig")
    {
        return Err(malformed(format!("JWK use is {u}; a signing key must have use sig (or none)")));
    }
    Ok(obj)
}

fn jwk_coordinate(obj: &Map<String, Value>, name: &str) -> Result<Vec<u8>, KeyError> {
    let s = obj
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| malformed(format!("JWK member {name} is missing or not a string")))?;
    let bytes = URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| malformed(format!("JWK member {name} is not base64url without padding")))?;
    if bytes.len() != 32 {
        return Err(malformed(format!("JWK member {name} decodes to {} bytes; P-256 needs exactly 32", bytes.len())));
    }
    Ok(bytes)
}

fn jwk_public(obj: &Map<String, Value>) -> Result<VerifyingKey, KeyError> {
    let x = jwk_coordinate(obj, "x")?;
    let y = jwk_coordinate(obj, "y")?;
    let mut sec1 = Vec::with_capacity(65);
    sec1.push(4);
    sec1.extend_from_slice(&x);
    sec1.extend_from_slice(&y);
    let public = p256::PublicKey::from_sec1_bytes(&sec1).map_err(|_| malformed("JWK x/y is not a point on P-256"))?;
    VerifyingKey::from_public(public)
}

// ---------------------------------------------------------------------------------------------------------------------
// PEM
// ---------------------------------------------------------------------------------------------------------------------

/// Whether a key is private or public.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// A private key (it also holds the public key).
    Private,
    /// A public key.
    Public,
}

/// The container a PEM key came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFormat {
    /// `EC PRIVATE KEY` (SEC1, RFC 5915).
    Sec1,
    /// `PRIVATE KEY` (PKCS#8, RFC 5208).
    Pkcs8,
    /// `PUBLIC KEY` (SubjectPublicKeyInfo, RFC 5280).
    Spki,
}

impl KeyFormat {
    /// `SEC1`, `PKCS#8` or `SPKI`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyFormat::Sec1 => "SEC1",
            KeyFormat::Pkcs8 => "PKCS#8",
            KeyFormat::Spki => "SPKI",
        }
    }
}

/// What [`inspect_pem`] found in a key file: always an ECDSA P-256 key (anything else is an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    /// Private or public.
    pub kind: KeyKind,
    /// The container format.
    pub format: KeyFormat,
    /// Always `P-256`.
    pub curve: &'static str,
    /// The RFC 7638 thumbprint of the public key.
    pub thumbprint: String,
    /// The public JWK.
    pub public_jwk: Value,
}

impl fmt::Display for KeyInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            KeyKind::Private => "private",
            KeyKind::Public => "public",
        };
        write!(
            f,
            "ECDSA {} (secp256r1 / prime256v1) {kind} key, {}, JWK thumbprint {}",
            self.curve,
            self.format.as_str(),
            self.thumbprint
        )
    }
}

/// Inspects a PEM key file (the `a2a key check FILE` command): succeeds only for an ECDSA P-256 key, private or public,
/// and says what it is; refuses everything else with the reason (the equivalent of
/// `openssl ec -in key.pem -text -noout | grep secp256r1`).
pub fn inspect_pem(pem: &str) -> Result<KeyInfo, KeyError> {
    let (kind, format, public) = match parse_pem(pem)? {
        ParsedPem::Private(k, f) => (KeyKind::Private, f, k.verifying_key().clone()),
        ParsedPem::Public(k) => (KeyKind::Public, KeyFormat::Spki, k),
    };
    Ok(KeyInfo { kind, format, curve: "P-256", thumbprint: public.thumbprint(), public_jwk: public.to_jwk() })
}

enum ParsedPem {
    Private(SigningKey, KeyFormat),
    Public(VerifyingKey),
}

struct PemBlock {
    label: String,
    der: Zeroizing<Vec<u8>>,
}

/// Splits PEM text into its blocks. Legacy encrypted PEM (`Proc-Type: 4,ENCRYPTED`) is reported as encrypted.
fn pem_blocks(text: &str) -> Result<Vec<PemBlock>, KeyError> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, Zeroizing<String>)> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(label) = line.strip_prefix("-----BEGIN ").and_then(|l| l.strip_suffix("-----")) {
            if current.is_some() {
                return Err(malformed("a PEM block starts inside another one"));
            }
            current = Some((label.to_owned(), Zeroizing::new(String::new())));
        } else if let Some(label) = line.strip_prefix("-----END ").and_then(|l| l.strip_suffix("-----")) {
            let Some((begin, body)) = current.take() else {
                return Err(malformed("a PEM END line without its BEGIN line"));
            };
            if begin != label {
                return Err(malformed(format!("PEM block BEGIN {begin} ends with END {label}")));
            }
            let der = STANDARD
                .decode(body.as_bytes())
                .map_err(|_| malformed(format!("the base64 of the PEM block {label} is invalid")))?;
            blocks.push(PemBlock { label: begin, der: Zeroizing::new(der) });
        } else if let Some((_, body)) = current.as_mut() {
            if line.contains(':') {
                if line.starts_with("Proc-Type") && line.contains("ENCRYPTED") {
                    return Err(KeyError::Encrypted);
                }
                // Other RFC 1421 headers (DEK-Info, Comment) carry no key material.
                continue;
            }
            body.push_str(line);
        }
    }
    if current.is_some() {
        return Err(malformed("a PEM block has no END line"));
    }
    Ok(blocks)
}

fn parse_pem(text: &str) -> Result<ParsedPem, KeyError> {
    let blocks = pem_blocks(text)?;
    // Parameter blocks (`EC PARAMETERS` written by `openssl ecparam -genkey`, `DSA PARAMETERS`) carry no key.
    let mut keys = blocks.iter().filter(|b| !b.label.ends_with(" PARAMETERS"));
    let Some(block) = keys.next() else {
        let trimmed = text.trim_start();
        return Err(if trimmed.starts_with('{') {
            malformed("this is not PEM but JSON (a JWK?); load it as a JWK")
        } else if trimmed.starts_with("ssh-") || trimmed.starts_with("ecdsa-sha2-") {
            malformed("this is an OpenSSH public key; convert it with `ssh-keygen -e -m PKCS8 -f FILE`")
        } else {
            malformed("no PEM block (-----BEGIN ...-----) found")
        });
    };
    if keys.next().is_some() {
        return Err(malformed("the file holds more than one key; keep one key per file"));
    }
    match block.label.as_str() {
        "EC PRIVATE KEY" => {
            let ec = sec1::EcPrivateKey::from_der(&block.der).map_err(|e| {
                malformed(format!("not a valid SEC1 EC private key with a named curve (explicit curve parameters are not supported): {e}"))
            })?;
            let curve = ec
                .parameters
                .and_then(sec1::EcParameters::named_curve)
                .ok_or_else(|| malformed("the SEC1 EC private key does not name its curve"))?;
            check_curve(curve)?;
            let secret = p256::SecretKey::from_sec1_der(&block.der)
                .map_err(|e| malformed(format!("invalid SEC1 P-256 private key: {e}")))?;
            Ok(ParsedPem::Private(SigningKey::from_secret(secret)?, KeyFormat::Sec1))
        }
        "PRIVATE KEY" => {
            let info = PrivateKeyInfoRef::from_der(&block.der)
                .map_err(|e| malformed(format!("not a valid PKCS#8 private key: {e}")))?;
            let params = info.algorithm.parameters.map(|p| p.decode_as::<ObjectIdentifier>());
            check_algorithm(info.algorithm.oid, params.and_then(Result::ok))?;
            let secret = p256::SecretKey::from_pkcs8_der(&block.der)
                .map_err(|e| malformed(format!("invalid PKCS#8 P-256 private key: {e}")))?;
            Ok(ParsedPem::Private(SigningKey::from_secret(secret)?, KeyFormat::Pkcs8))
        }
        "PUBLIC KEY" => {
            let info = SubjectPublicKeyInfoRef::from_der(&block.der)
                .map_err(|e| malformed(format!("not a valid SubjectPublicKeyInfo: {e}")))?;
            let params = info.algorithm.parameters.map(|p| p.decode_as::<ObjectIdentifier>());
            check_algorithm(info.algorithm.oid, params.and_then(Result::ok))?;
            let public = p256::PublicKey::from_public_key_der(&block.der)
                .map_err(|e| malformed(format!("invalid P-256 public key: {e}")))?;
            Ok(ParsedPem::Public(VerifyingKey::from_public(public)?))
        }
        "ENCRYPTED PRIVATE KEY" => Err(KeyError::Encrypted),
        "RSA PRIVATE KEY" | "RSA PUBLIC KEY" => Err(unsupported("RSA")),
        "DSA PRIVATE KEY" => Err(unsupported("DSA")),
        "OPENSSH PRIVATE KEY" => Err(malformed(
            "OpenSSH private key format is not supported; convert it with `ssh-keygen -p -m PKCS8 -f FILE`",
        )),
        "CERTIFICATE" => Err(malformed(
            "this is an X.509 certificate, not a key; extract its key with `openssl x509 -pubkey -noout -in FILE`",
        )),
        other => Err(malformed(format!(
            "unexpected PEM block {other:?}; expected PRIVATE KEY, EC PRIVATE KEY or PUBLIC KEY"
        ))),
    }
}

const OID_EC_PUBLIC_KEY: &str = "1.2.840.10045.2.1";

fn check_algorithm(alg: ObjectIdentifier, params: Option<ObjectIdentifier>) -> Result<(), KeyError> {
    match alg.to_string().as_str() {
        OID_EC_PUBLIC_KEY => match params {
            Some(curve) => check_curve(curve),
            None => Err(malformed("the EC key does not name its curve (explicit curve parameters are not supported)")),
        },
        "1.2.840.113549.1.1.1" => Err(unsupported("RSA")),
        "1.2.840.113549.1.1.10" => Err(unsupported("RSA-PSS")),
        "1.3.101.112" => Err(unsupported("Ed25519")),
        "1.3.101.113" => Err(unsupported("Ed448")),
        "1.3.101.110" => Err(unsupported("X25519")),
        "1.3.101.111" => Err(unsupported("X448")),
        "1.2.840.10040.4.1" => Err(unsupported("DSA")),
        "1.2.156.10197.1.301" => Err(unsupported("SM2")),
        other => Err(unsupported(format!("unknown algorithm OID {other}"))),
    }
}

fn check_curve(curve: ObjectIdentifier) -> Result<(), KeyError> {
    match curve.to_string().as_str() {
        "1.2.840.10045.3.1.7" => Ok(()),
        "1.3.132.0.34" => Err(unsupported("P-384 (secp384r1)")),
        "1.3.132.0.35" => Err(unsupported("P-521 (secp521r1)")),
        "1.3.132.0.10" => Err(unsupported("secp256k1")),
        "1.2.840.10045.3.1.1" => Err(unsupported("P-192 (prime192v1)")),
        "1.3.132.0.33" => Err(unsupported("P-224 (secp224r1)")),
        "1.2.156.10197.1.301" => Err(unsupported("SM2")),
        other if other.starts_with("1.3.36.3.3.2.8.1.1.") => Err(unsupported(format!("Brainpool curve OID {other}"))),
        other => Err(unsupported(format!("unknown EC curve OID {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_key_signs_and_its_public_key_verifies() {
        let k = SigningKey::generate().expect("generate");
        let sig = k.sign(b"hello").expect("sign");
        assert_eq!(k.verifying_key().verify(b"hello", &sig), Ok(()));
        assert_eq!(k.verifying_key().verify(b"hellO", &sig), Err(KeyError::SignatureInvalid));
    }

    #[test]
    fn private_jwk_round_trips_and_public_jwk_has_four_members() {
        let k = SigningKey::generate().expect("generate");
        let jwk = k.to_jwk();
        let k2 = SigningKey::from_jwk(&jwk).expect("round trip");
        assert_eq!(k2.verifying_key(), k.verifying_key());
        let public = k.verifying_key().to_jwk();
        assert_eq!(public.as_object().map(Map::len), Some(4));
        assert_eq!(&VerifyingKey::from_jwk(&public).expect("public"), k.verifying_key());
    }

    #[test]
    fn private_jwk_as_public_key_is_refused_as_wrong_kind() {
        let k = SigningKey::generate().expect("generate");
        let err = VerifyingKey::from_jwk(&k.to_jwk()).expect_err("refused");
        assert_eq!(err, KeyError::WrongKind { expected: "public", found: "private" });
        assert_eq!(err.to_string(), "a private key where a public key is expected");
    }

    #[test]
    fn der_signature_is_refused_with_length_error() {
        let k = SigningKey::generate().expect("generate");
        let err = k.verifying_key().verify(b"m", &[0x30; 70]).expect_err("refused");
        assert_eq!(err.code(), ErrorCode::SIGNATURE_MALFORMED);
    }

    #[test]
    fn pkcs8_pem_round_trips() {
        let k = SigningKey::generate().expect("generate");
        let pem = k.to_pkcs8_pem().expect("pem");
        let k2 = SigningKey::from_pem(&pem).expect("parse");
        assert_eq!(k2.verifying_key(), k.verifying_key());
        let info = inspect_pem(&pem).expect("inspect");
        assert_eq!((info.kind, info.format), (KeyKind::Private, KeyFormat::Pkcs8));
        let pub_pem = k.verifying_key().to_pem().expect("spki");
        assert_eq!(&VerifyingKey::from_pem(&pub_pem).expect("spki parse"), k.verifying_key());
    }

    #[test]
    fn rfc7638_thumbprint_matches_the_rfc_style_computation() {
        // RFC 7638 defines the input as the members crv, kty, x, y in lexicographic order without whitespace.
        let k = SigningKey::generate().expect("generate");
        let jwk = k.verifying_key().to_jwk();
        let canonical = crate::canonical::to_canonical_vec(&jwk);
        assert_eq!(k.verifying_key().thumbprint(), URL_SAFE_NO_PAD.encode(Sha256::digest(&canonical)));
    }

    #[test]
    fn zero_and_order_scalars_are_refused() {
        assert!(SigningKey::from_bytes(&[0u8; 32]).is_err());
        let n = [
            0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbc, 0xe6,
            0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
        ];
        assert!(SigningKey::from_bytes(&n).is_err());
        assert!(SigningKey::from_bytes(&[1u8; 31]).is_err());
    }
}
