//! What the exchange carries and who else counts its memory: [`Item`] and [`Account`].

use super::ExchangeError;
use std::fmt;

/// What travels through a [`BoundedExchange`](super::BoundedExchange).
pub trait Item: Clone + Send + Sync + 'static {
    /// Bytes of memory it is charged while queued in memory.
    fn bytes(&self) -> usize;

    /// Rows it carries (for each output's totals).
    fn rows(&self) -> u64;

    /// Writes itself to `out`, for the spill file.
    ///
    /// # Errors
    /// When it cannot be written.
    fn spill(&self, out: &mut Vec<u8>) -> Result<(), ExchangeError>;

    /// Reads back what [`spill`](Self::spill) wrote.
    ///
    /// # Errors
    /// When the bytes do not read back.
    fn unspill(bytes: &[u8]) -> Result<Self, ExchangeError>;
}

/// A message of a destination's output ([`partout_format::Message`]: an IPC batch or a
/// Presto page), charged its bytes and spilled in the message's own framing.
impl Item for partout_format::Message {
    fn bytes(&self) -> usize {
        self.size()
    }

    fn rows(&self) -> u64 {
        partout_format::Message::rows(self)
    }

    fn spill(&self, out: &mut Vec<u8>) -> Result<(), ExchangeError> {
        self.write_to(out);
        Ok(())
    }

    fn unspill(bytes: &[u8]) -> Result<Self, ExchangeError> {
        Self::read_from(bytes).map_err(|e| ExchangeError::Spill(e.to_string()))
    }
}

/// Memory outside the exchange's own count that must grant what it holds: a memory pool.
pub trait Account: Send + Sync + fmt::Debug {
    /// Takes `bytes` more, or says why not.
    ///
    /// # Errors
    /// Why the bytes cannot be had (the item is then spilled, or the exchange fails).
    fn try_grow(&self, bytes: usize) -> Result<(), String>;

    /// Gives `bytes` back.
    fn shrink(&self, bytes: usize);
}
