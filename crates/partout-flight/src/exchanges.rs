//! [`Exchanges`]: the named exchanges a server serves, live or finished, shared by the Flight
//! service and the Presto HTTP server.

use crate::error::{ExchangeError, Result};
use crate::files::FinishedOutput;
use crate::live::LiveExchange;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

/// One served exchange.
#[derive(Debug, Clone)]
pub enum Exchange {
    /// Fed while it is read.
    Live(Arc<LiveExchange>),
    /// A finished output directory, read from its files.
    Finished(Arc<FinishedOutput>),
}

impl Exchange {
    /// Destinations.
    pub fn partitions(&self) -> u32 {
        match self {
            Self::Live(live) => live.partitions(),
            Self::Finished(finished) => finished.partitions(),
        }
    }

    /// An error unless there is a destination `p`.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] naming how many there are.
    pub fn check(&self, name: &str, p: u32) -> Result<()> {
        if p < self.partitions() {
            Ok(())
        } else {
            Err(ExchangeError::NotFound(format!(
                "no destination {p} in exchange {name:?} of {} destinations",
                self.partitions()
            )))
        }
    }
}

/// The exchanges a server serves, by name. Clones share them.
#[derive(Debug, Clone, Default)]
pub struct Exchanges {
    map: Arc<RwLock<BTreeMap<String, Exchange>>>,
}

impl Exchanges {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `exchange` as `name`.
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] for a name taken already, empty, or holding
    /// characters a URL path would change (Presto's protocol puts it in one).
    pub fn add(&self, name: impl Into<String>, exchange: Exchange) -> Result<()> {
        let name = name.into();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(ExchangeError::InvalidArgument(format!(
                "an exchange name is letters, digits, '-', '_' and '.': {name:?}"
            )));
        }
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(&name) {
            return Err(ExchangeError::InvalidArgument(format!(
                "an exchange named {name:?} is served already"
            )));
        }
        map.insert(name, exchange);
        Ok(())
    }

    /// Serves the finished output in `dir` as `name`.
    ///
    /// # Errors
    /// As [`FinishedOutput::open`] and [`add`](Self::add).
    pub fn add_directory(&self, name: impl Into<String>, dir: impl AsRef<Path>) -> Result<()> {
        let output = FinishedOutput::open(dir)?;
        self.add(name, Exchange::Finished(Arc::new(output)))
    }

    /// Serves `live` as `name`.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn add_live(&self, name: impl Into<String>, live: Arc<LiveExchange>) -> Result<()> {
        self.add(name, Exchange::Live(live))
    }

    /// The exchange `name`.
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`] naming those there are.
    pub fn get(&self, name: &str) -> Result<Exchange> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        map.get(name).cloned().ok_or_else(|| {
            let names: Vec<&str> = map.keys().map(String::as_str).collect();
            ExchangeError::NotFound(format!(
                "no exchange {name:?} (served: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ))
        })
    }

    /// Every exchange, by name.
    pub fn all(&self) -> Vec<(String, Exchange)> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}
