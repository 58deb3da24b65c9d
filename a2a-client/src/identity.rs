//! Who the client is: a did:web DID (its `A2A-Sender-ID`) and, to sign requests, a P-256 key published in the DID's
//! document under a key id (`spec/PROTOCOL.md` §9).

use std::path::Path;

use a2a_core::did::{Did, DidDocument};
use a2a_core::integrity;
use a2a_core::keys::SigningKey;

use crate::error::ClientError;

/// The client's identity.
///
/// ```
/// use a2a_client::Identity;
///
/// let signed = Identity::generate("did:web:caller.example.com", "key-1").expect("valid");
/// assert!(signed.can_sign());
/// let doc = signed.did_document().expect("has a key");
/// assert_eq!(doc.id.as_str(), "did:web:caller.example.com");
///
/// let unsigned = Identity::unsigned("did:web:caller.example.com").expect("valid");
/// assert!(!unsigned.can_sign());
/// ```
#[derive(Clone)]
pub struct Identity {
    did: Did,
    signer: Option<(String, SigningKey)>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("did", &self.did.as_str())
            .field("key_id", &self.signer.as_ref().map(|(k, _)| k.as_str()))
            .finish()
    }
}

fn parse_did(did: &str) -> Result<Did, ClientError> {
    Did::parse(did).map_err(|e| {
        ClientError::invalid(format!(
            "the client's DID {did:?} is invalid: {e} (write e.g. did:web:caller.example.com)"
        ))
    })
}

impl Identity {
    /// An identity that cannot sign: its requests carry `A2A-Sender-ID`, which is a claim, not a proof (HDR-8).
    pub fn unsigned(did: &str) -> Result<Identity, ClientError> {
        Ok(Identity { did: parse_did(did)?, signer: None })
    }

    /// An identity that signs with `key`, published in the DID document as `<did>#<key_id>`.
    pub fn new(did: &str, key_id: &str, key: SigningKey) -> Result<Identity, ClientError> {
        let did = parse_did(did)?;
        if !integrity::is_valid_key_id(key_id) {
            return Err(ClientError::invalid(format!(
                "key id {key_id:?} is invalid: use 1-128 characters of A-Z a-z 0-9 . _ ~ - (e.g. key-1)"
            )));
        }
        Ok(Identity { did, signer: Some((key_id.to_owned(), key)) })
    }

    /// An identity with a fresh P-256 key.
    pub fn generate(did: &str, key_id: &str) -> Result<Identity, ClientError> {
        let key = SigningKey::generate().map_err(|e| ClientError::invalid(format!("cannot generate a key: {e}")))?;
        Self::new(did, key_id, key)
    }

    /// An identity whose key is read from a PEM file (PKCS#8 or SEC1; ECDSA P-256 only, KEY-5).
    pub fn from_pem_file(did: &str, key_id: &str, path: &Path) -> Result<Identity, ClientError> {
        let pem = std::fs::read_to_string(path)
            .map_err(|e| ClientError::invalid(format!("cannot read the key file {}: {e}", path.display())))?;
        let key = SigningKey::from_pem(&pem)
            .map_err(|e| ClientError::invalid(format!("the key file {}: {e}", path.display())))?;
        Self::new(did, key_id, key)
    }

    /// The DID.
    pub fn did(&self) -> &str {
        self.did.as_str()
    }

    /// The key id, when the identity can sign.
    pub fn key_id(&self) -> Option<&str> {
        self.signer.as_ref().map(|(k, _)| k.as_str())
    }

    /// Whether the identity has a key.
    pub fn can_sign(&self) -> bool {
        self.signer.is_some()
    }

    pub(crate) fn signer(&self) -> Option<(&str, &SigningKey)> {
        self.signer.as_ref().map(|(k, key)| (k.as_str(), key))
    }

    /// The DID document to publish at the DID's URL (DID-12, DID-14), when the identity has a key.
    pub fn did_document(&self) -> Option<DidDocument> {
        let (key_id, key) = self.signer.as_ref()?;
        Some(DidDocument::generate(&self.did, &[(key_id.clone(), key.verifying_key().to_jwk())]))
    }
}
