//! A Parquet reader's bytes from a store's object: each column chunk of the row group being
//! read through a window of its own, and the next row group's first windows got while this
//! one is decoded.
//!
//! ```text
//!  row groups to read, in order: g0 g3 g4
//!  entering g3: its windows (got ahead while g0 was read, or now) ─► held
//!               g4's first windows begun in the background          ─► ahead
//!  a page past its chunk's window: the window moved on, what it held from there kept
//! ```
//!
//! Each row group's windows share half of [`READ_BYTES`] (the other half is the group got
//! ahead): a group that fits is got whole, each chunk in its window; a larger one shares it
//! by its chunks' sizes, at least [`MIN_WINDOW_BYTES`] a chunk. A group's chunks lie one
//! after another, so its first windows are one request.

use super::{READ_BYTES, StoreObject};
use crate::store;
use bytes::Bytes;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// The least window of a column chunk.
const MIN_WINDOW_BYTES: u64 = 64 << 10;

/// An object's column chunks, each read through a window of its own.
pub(crate) struct StoreChunks {
    pub(crate) inner: Arc<Chunks>,
}

/// One column chunk: its bytes in the file and its row group.
pub(super) struct Chunk {
    pub(super) range: Range<u64>,
    pub(super) group: usize,
}

pub(crate) struct Chunks {
    pub(super) object: Arc<StoreObject>,
    /// Every column chunk, by where it starts.
    chunks: Vec<Chunk>,
    /// Each chunk's window.
    windows: Vec<u64>,
    /// The row groups to be read, in order.
    order: Vec<usize>,
    pub(super) held: Mutex<Held>,
}

/// A row group's first windows being got.
type Ahead = (usize, tokio::task::JoinHandle<io::Result<Vec<Bytes>>>);

/// The windows held: those of one row group, by chunk; and the next group's, being got.
#[derive(Default)]
pub(super) struct Held {
    group: Option<usize>,
    pub(super) windows: Vec<(usize, u64, Bytes)>,
    ahead: Option<Ahead>,
}

impl Held {
    /// The row group being got ahead.
    #[cfg(test)]
    pub(super) fn ahead_group(&self) -> Option<usize> {
        self.ahead.as_ref().map(|(group, _)| *group)
    }
}

impl Drop for Chunks {
    fn drop(&mut self) {
        let held = self.held.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some((_, task)) = held.ahead.take() {
            task.abort();
        }
    }
}

impl StoreChunks {
    /// The column chunks of `object`, of which row groups `groups` are read, in that order.
    pub(crate) fn new(
        object: Arc<StoreObject>,
        metadata: &parquet::file::metadata::ParquetMetaData,
        groups: &[usize],
    ) -> Self {
        let mut chunks = Vec::new();
        for (group, row_group) in metadata.row_groups().iter().enumerate() {
            for column in row_group.columns() {
                let (start, len) = column.byte_range();
                chunks.push(Chunk {
                    range: start..start.saturating_add(len),
                    group,
                });
            }
        }
        Self::of(
            object,
            chunks,
            READ_BYTES / 2,
            MIN_WINDOW_BYTES,
            groups.to_vec(),
        )
    }

    /// The `chunks` of `object`, row groups `order` read in that order, each group's chunks
    /// through windows of `group_bytes` together: a group that fits has each chunk whole,
    /// one larger shares them by its chunks' sizes, at least `min_window` each.
    pub(super) fn of(
        object: Arc<StoreObject>,
        mut chunks: Vec<Chunk>,
        group_bytes: u64,
        min_window: u64,
        order: Vec<usize>,
    ) -> Self {
        chunks.sort_by_key(|c| c.range.start);
        let len = |c: &Chunk| c.range.end - c.range.start;
        let mut group_sizes = std::collections::HashMap::<usize, u64>::new();
        for c in &chunks {
            *group_sizes.entry(c.group).or_default() += len(c);
        }
        let windows = chunks
            .iter()
            .map(|c| match group_sizes[&c.group] {
                total if total <= group_bytes => len(c),
                total => {
                    let share = (group_bytes as u128 * len(c) as u128 / total as u128) as u64;
                    share.max(min_window)
                }
            })
            .collect();
        Self {
            inner: Arc::new(Chunks {
                object,
                chunks,
                windows,
                order,
                held: Mutex::new(Held::default()),
            }),
        }
    }
}

impl Chunks {
    /// The chunk holding byte `at`.
    fn chunk_at(&self, at: u64) -> Option<usize> {
        let i = self.chunks.partition_point(|c| c.range.start <= at);
        (i > 0 && self.chunks[i - 1].range.contains(&at)).then(|| i - 1)
    }

    /// What a held window holds from `at` on.
    fn held_from(held: &Held, at: u64) -> Option<Bytes> {
        held.windows.iter().find_map(|(_, start, bytes)| {
            (at >= *start && at < start + bytes.len() as u64)
                .then(|| bytes.slice((at - start) as usize..))
        })
    }

    /// Row group `group`'s chunks, and the first window of each.
    fn first_windows(&self, group: usize) -> (Vec<usize>, Vec<Range<u64>>) {
        self.chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| c.group == group)
            .map(|(i, c)| {
                let window = self.windows[i].max(1);
                (i, c.range.start..c.range.end.min(c.range.start + window))
            })
            .unzip()
    }

    /// Makes row group `group` the one held: its first windows, got ahead or now; and the
    /// next group's begun.
    fn enter(&self, held: &mut Held, group: usize) -> io::Result<()> {
        let (members, ranges) = self.first_windows(group);
        held.windows.clear();
        held.group = None;
        let got = match held.ahead.take() {
            Some((ahead, task)) if ahead == group => {
                store::wait(task).map_err(io::Error::other)??
            }
            other => {
                if let Some((_, task)) = other {
                    task.abort();
                }
                self.object.get_all(ranges.clone())?
            }
        };
        held.windows = members
            .into_iter()
            .zip(ranges)
            .zip(got)
            .map(|((c, range), bytes)| (c, range.start, bytes))
            .collect();
        held.group = Some(group);
        let next = self
            .order
            .iter()
            .position(|&g| g == group)
            .and_then(|at| self.order.get(at + 1));
        if let Some(&next) = next {
            let (_, ranges) = self.first_windows(next);
            held.ahead = Some((next, self.object.get_later(ranges)?));
        }
        Ok(())
    }

    /// What the window of the chunk holding `at` holds from there: at least a byte (a byte
    /// alone outside every chunk).
    pub(super) fn bytes_from(&self, at: u64) -> io::Result<Bytes> {
        self.window_from(at, 1)
    }

    /// Bytes `start..start + len`: from the window of their chunk, which is moved on to
    /// hold them when it does not (what it holds from `start` kept, the rest got). Bytes
    /// outside every chunk are got as asked.
    pub(super) fn bytes(&self, start: u64, len: u64) -> io::Result<Bytes> {
        Ok(self.window_from(start, len)?.slice(..len as usize))
    }

    /// What a window holds from `start` on, `len` bytes at least ([`Self::bytes`]).
    fn window_from(&self, start: u64, len: u64) -> io::Result<Bytes> {
        let end = start.saturating_add(len);
        let Some(i) = self.chunk_at(start) else {
            return self.object.get(start..end);
        };
        let chunk = &self.chunks[i];
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.group != Some(chunk.group) {
            self.enter(&mut held, chunk.group)?;
        }
        let kept = Self::held_from(&held, start);
        if let Some(from) = &kept
            && from.len() as u64 >= len
        {
            return Ok(from.clone());
        }
        // A window from `start` holding at least up to `end`, within its chunk otherwise.
        let window = self.windows[i].max(1);
        let range = start
            ..start
                .saturating_add(window)
                .max(end)
                .min(chunk.range.end.max(end));
        let bytes = match kept {
            Some(kept) => {
                let rest = self.object.get(start + kept.len() as u64..range.end)?;
                let mut joined = Vec::with_capacity(kept.len() + rest.len());
                joined.extend_from_slice(&kept);
                joined.extend_from_slice(&rest);
                Bytes::from(joined)
            }
            None => self.object.get(range.clone())?,
        };
        held.windows.retain(|(c, _, _)| *c != i);
        held.windows.push((i, range.start, bytes.clone()));
        Ok(bytes)
    }
}
