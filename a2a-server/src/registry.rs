//! The capability registry (seed §5.4): which other agents offer which capabilities. It feeds FALLBACK
//! (`spec/PROTOCOL.md` §11) and takes no part in the handshake itself.

use std::sync::RwLock;

use a2a_core::capability::CapabilityDeclaration;
use serde::{Deserialize, Serialize};

use crate::store::StoreError;

/// One capability offered by one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistryEntry {
    /// The agent's DID.
    pub agent: String,
    /// The agent's A2A endpoint, e.g. `https://b.example.com/a2a`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The declaration.
    pub capability: CapabilityDeclaration,
    /// When the entry was last refreshed (ms since the epoch).
    #[serde(default)]
    pub updated_at_ms: u64,
}

/// A source of registry entries.
#[async_trait::async_trait]
pub trait Registry: Send + Sync + 'static {
    /// Every live entry that is relevant to `capability`: entries offering it, entries declaring `fallback_for` it,
    /// and entries whose declaration lists sub-capabilities of it (or, when it names a parent, the entries of those
    /// sub-capabilities). Returning more is allowed; the caller filters.
    async fn related(&self, capability: &str) -> Result<Vec<RegistryEntry>, StoreError>;

    /// Adds or refreshes entries.
    async fn register(&self, entries: Vec<RegistryEntry>) -> Result<(), StoreError>;
}

/// A registry held in memory, filled from configuration or by [`Registry::register`].
#[derive(Default)]
pub struct MemoryRegistry {
    entries: RwLock<Vec<RegistryEntry>>,
}

impl MemoryRegistry {
    /// A registry holding these entries.
    pub fn new(entries: Vec<RegistryEntry>) -> Self {
        MemoryRegistry { entries: RwLock::new(entries) }
    }
}

#[async_trait::async_trait]
impl Registry for MemoryRegistry {
    async fn related(&self, capability: &str) -> Result<Vec<RegistryEntry>, StoreError> {
        let entries = self.entries.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let parents: Vec<&CapabilityDeclaration> = entries
            .iter()
            .map(|e| &e.capability)
            .filter(|c| c.name == capability && !c.sub_capabilities.is_empty())
            .collect();
        Ok(entries
            .iter()
            .filter(|e| {
                let c = &e.capability;
                c.name == capability
                    || c.fallback_for.iter().any(|f| f == capability)
                    || parents.iter().any(|p| p.sub_capabilities.contains(&c.name))
            })
            .cloned()
            .collect())
    }

    async fn register(&self, new: Vec<RegistryEntry>) -> Result<(), StoreError> {
        let mut entries = self.entries.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        for n in new {
            if let Some(e) = entries.iter_mut().find(|e| e.agent == n.agent && e.capability.name == n.capability.name) {
                *e = n;
            } else {
                entries.push(n);
            }
        }
        Ok(())
    }
}
