//! [`Exchanges`]: the named exchanges a server serves, live or finished, shared by the Flight
//! service and the Presto HTTP server.

use crate::error::{ExchangeError, Result};
use crate::live::LiveExchange;
use partout_input::StorageOptions;
use partout_output::FinishedOutput;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock, Weak};

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

/// What a server lets its clients make: exchanges made by Flight's `create` action count
/// against these (exchanges a program adds itself are its own to bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most exchanges served at once, finished and live (default 1024).
    pub max_exchanges: usize,
    /// The most memory the exchanges clients create may hold together (default 4 GiB): each
    /// is charged its budget and [`DESTINATION_BYTES`] per destination. Pages of finished
    /// outputs read for Presto consumers and not yet acknowledged count against it too.
    pub memory_limit: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_exchanges: 1024,
            memory_limit: 4 << 30,
        }
    }
}

/// What each destination of a live exchange is charged against [`Limits::memory_limit`]
/// beside the budget: its queue, counters and wake-ups.
pub const DESTINATION_BYTES: usize = 512;

/// The longest exchange name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// At most `max` characters of `text` (client input echoed in an error), marked when cut.
pub(crate) fn shown(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{:?}…", &text[..at]),
        None => format!("{text:?}"),
    }
}

/// The exchanges a server serves, by name. Clones share them.
#[derive(Debug, Clone, Default)]
pub struct Exchanges {
    registry: Arc<RwLock<Registry>>,
}

#[derive(Default)]
struct Registry {
    /// Each exchange, with the memory charged for it against the limits.
    map: BTreeMap<String, (Exchange, usize)>,
    charged: usize,
    limits: Limits,
    /// Told the name of each exchange removed (a protocol's state for it is freed).
    on_remove: Vec<Weak<RemoveHook>>,
}

/// What [`Exchanges::on_remove`] calls.
pub(crate) type RemoveHook = dyn Fn(&str) + Send + Sync;

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("map", &self.map)
            .field("charged", &self.charged)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Exchanges {
    /// None yet, within the default [`Limits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// None yet, within `limits`.
    pub fn with_limits(limits: Limits) -> Self {
        let exchanges = Self::default();
        exchanges.write().limits = limits;
        exchanges
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves `exchange` as `name`.
    ///
    /// # Errors
    /// [`ExchangeError::InvalidArgument`] for a name taken already, empty, `.` or `..`, longer
    /// than [`MAX_NAME_BYTES`], or holding characters a URL path would change (Presto's
    /// protocol puts it in one); [`ExchangeError::ResourcesExhausted`] past
    /// [`Limits::max_exchanges`].
    pub fn add(&self, name: impl Into<String>, exchange: Exchange) -> Result<()> {
        self.add_charged(name.into(), exchange, 0)
    }

    /// Serves `exchange` as `name`, charging `bytes` against [`Limits::memory_limit`] until it
    /// is dropped.
    ///
    /// # Errors
    /// As [`add`](Self::add), and [`ExchangeError::ResourcesExhausted`] past the memory limit.
    pub(crate) fn add_charged(&self, name: String, exchange: Exchange, bytes: usize) -> Result<()> {
        let mut registry = self.write();
        room(&registry, &name, bytes)?;
        registry.charged += bytes;
        registry.map.insert(name, (exchange, bytes));
        Ok(())
    }

    /// An error unless an exchange named `name` charged `bytes` could be added now (checked
    /// again when it is added: this is to refuse before making it).
    ///
    /// # Errors
    /// As [`add_charged`](Self::add_charged).
    pub(crate) fn check_room(&self, name: &str, bytes: usize) -> Result<()> {
        room(&self.read(), name, bytes)
    }

    /// Stops serving `name`, giving back what it was charged; a live exchange is cancelled
    /// (its consumers and producers get an error saying so).
    ///
    /// # Errors
    /// [`ExchangeError::NotFound`].
    pub fn remove(&self, name: &str) -> Result<Exchange> {
        let exchange = self.forget(name)?;
        if let Exchange::Live(live) = &exchange {
            live.cancel("the exchange was dropped");
        }
        Ok(exchange)
    }

    /// Stops serving `name` as [`remove`](Self::remove) does, without cancelling it.
    fn forget(&self, name: &str) -> Result<Exchange> {
        let removed = {
            let mut registry = self.write();
            let removed = registry.map.remove(name);
            if let Some((_, bytes)) = &removed {
                registry.charged -= bytes;
            }
            removed
        };
        let (exchange, _) = removed.ok_or_else(|| self.not_found(name))?;
        let hooks: Vec<Arc<RemoveHook>> = {
            let mut registry = self.write();
            registry.on_remove.retain(|hook| hook.strong_count() > 0);
            registry
                .on_remove
                .iter()
                .filter_map(Weak::upgrade)
                .collect()
        };
        for hook in hooks {
            hook(name);
        }
        Ok(exchange)
    }

    /// Stops serving `live` as `name` once it is drained (every producer finished, every
    /// message acknowledged), giving back what it was charged. Requests under way finish as
    /// they would have; later ones find no such exchange.
    pub(crate) fn drop_when_drained(&self, name: &str, live: &Arc<LiveExchange>) {
        let registry = Arc::downgrade(&self.registry);
        let (name, this) = (name.to_string(), Arc::downgrade(live));
        live.when_drained(Box::new(move || {
            let Some(registry) = registry.upgrade() else {
                return;
            };
            let exchanges = Exchanges { registry };
            let same = matches!(
                exchanges.get(&name),
                Ok(Exchange::Live(served)) if this.upgrade().is_some_and(|l| Arc::ptr_eq(&l, &served))
            );
            if same {
                let _ = exchanges.forget(&name);
            }
        }));
    }

    /// Calls `hook` with the name of every exchange removed from now on, while `hook` lives
    /// (the registry keeps it weakly).
    pub(crate) fn on_remove(&self, hook: &Arc<RemoveHook>) {
        self.write().on_remove.push(Arc::downgrade(hook));
    }

    /// Bytes charged now against [`Limits::memory_limit`]: the exchanges clients made, and
    /// the pages of finished outputs held for Presto consumers until they acknowledge them.
    pub fn charged_bytes(&self) -> usize {
        self.read().charged
    }

    /// A charge of nothing yet against [`Limits::memory_limit`], for memory a protocol holds
    /// on a client's behalf; whatever it grows to is given back when it is dropped.
    pub(crate) fn charge(&self) -> Charge {
        Charge {
            registry: self.registry.clone(),
            bytes: 0,
        }
    }

    /// Serves the finished output in `dir` as `name`.
    ///
    /// # Errors
    /// As [`FinishedOutput::open`] and [`add`](Self::add).
    pub fn add_directory(&self, name: impl Into<String>, dir: impl AsRef<Path>) -> Result<()> {
        let output = FinishedOutput::open(dir)?;
        self.add(name, Exchange::Finished(Arc::new(output)))
    }

    /// Serves the finished output at `location` (a directory, or an object store's prefix
    /// whose client takes `options`) as `name`.
    ///
    /// # Errors
    /// As [`FinishedOutput::open_at`] and [`add`](Self::add).
    pub fn add_output(
        &self,
        name: impl Into<String>,
        location: &Path,
        options: &StorageOptions,
    ) -> Result<()> {
        let output = match location.to_str() {
            Some(text) => FinishedOutput::open_at(text, options)?,
            None => FinishedOutput::open(location)?,
        };
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
    /// [`ExchangeError::NotFound`] naming (some of) those there are.
    pub fn get(&self, name: &str) -> Result<Exchange> {
        let found = self.read().map.get(name).map(|(e, _)| e.clone());
        found.ok_or_else(|| self.not_found(name))
    }

    fn not_found(&self, name: &str) -> ExchangeError {
        const SHOWN: usize = 10;
        let registry = self.read();
        let mut names: Vec<&str> = registry
            .map
            .keys()
            .take(SHOWN)
            .map(String::as_str)
            .collect();
        let more = registry.map.len().saturating_sub(SHOWN);
        let more = match more {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        if names.is_empty() {
            names.push("none");
        }
        ExchangeError::NotFound(format!(
            "no exchange {} (served: {}{more})",
            shown(name, MAX_NAME_BYTES),
            names.join(", ")
        ))
    }

    /// Every exchange, by name.
    pub fn all(&self) -> Vec<(String, Exchange)> {
        let registry = self.read();
        registry
            .map
            .iter()
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect()
    }
}

/// Memory a protocol holds for a client (pages read ahead of its acknowledgements), counted
/// with the exchanges clients made against [`Limits::memory_limit`] and given back on drop.
#[derive(Debug)]
pub(crate) struct Charge {
    registry: Arc<RwLock<Registry>>,
    bytes: usize,
}

impl Charge {
    /// An error unless the server has memory left: what a request checks before it makes
    /// the charge grow. (It grows by what it reads after, one page past the limit at most.)
    ///
    /// # Errors
    /// [`ExchangeError::ResourcesExhausted`] naming the limit.
    pub(crate) fn check_room(&self) -> Result<()> {
        let registry = self.registry.read().unwrap_or_else(|e| e.into_inner());
        if registry.charged >= registry.limits.memory_limit {
            return Err(past_limits(format!(
                "the server holds {} bytes for exchanges and unacknowledged replies, its limit \
                 is {}; acknowledge what was read, or retry",
                registry.charged, registry.limits.memory_limit
            )));
        }
        Ok(())
    }

    /// Charges `bytes` more.
    pub(crate) fn grow(&mut self, bytes: usize) {
        let mut registry = self.registry.write().unwrap_or_else(|e| e.into_inner());
        registry.charged += bytes;
        self.bytes += bytes;
    }

    /// Gives `bytes` back (at most what is charged).
    pub(crate) fn shrink(&mut self, bytes: usize) {
        let bytes = bytes.min(self.bytes);
        let mut registry = self.registry.write().unwrap_or_else(|e| e.into_inner());
        registry.charged -= bytes;
        self.bytes -= bytes;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let bytes = self.bytes;
        self.shrink(bytes);
    }
}

/// An error unless `registry` has room for an exchange `name` charged `bytes`.
fn room(registry: &Registry, name: &str, bytes: usize) -> Result<()> {
    check_name(name)?;
    if registry.map.contains_key(name) {
        return Err(ExchangeError::InvalidArgument(format!(
            "an exchange named {name:?} is served already"
        )));
    }
    let limits = registry.limits;
    if registry.map.len() >= limits.max_exchanges {
        return Err(past_limits(format!(
            "{} exchanges are served, the server's limit; drop one first",
            registry.map.len()
        )));
    }
    if registry.charged.saturating_add(bytes) > limits.memory_limit {
        return Err(past_limits(format!(
            "exchange {name:?} needs {bytes} bytes; the exchanges made hold {} of the server's {}",
            registry.charged, limits.memory_limit
        )));
    }
    Ok(())
}

/// Past one of the server's limits: `what`, and the limit.
fn past_limits(what: String) -> ExchangeError {
    ExchangeError::ResourcesExhausted(format!("past the server's limits: {what}"))
}

/// An error unless `name` can name an exchange (see [`Exchanges::add`]).
fn check_name(name: &str) -> Result<()> {
    let allowed = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if name.is_empty() || name.len() > MAX_NAME_BYTES || !allowed || name == "." || name == ".." {
        return Err(ExchangeError::InvalidArgument(format!(
            "an exchange name is 1 to {MAX_NAME_BYTES} letters, digits, '-', '_' and '.', not \
             '.' or '..': {}",
            shown(name, MAX_NAME_BYTES)
        )));
    }
    Ok(())
}
