//! The staged rows' index: where each destination's ranges lie in the workers' scratch files,
//! read from their shuffle indexes once the workers are done ([`RangeIndex::read`]).

use super::scratch_paths;
use crate::{for_each_shuffle_range, sink_error};
use partout_exchange::WriterError;
use std::path::{Path, PathBuf};

/// The most bytes of a destination's ranges that follow each other in a scratch file read as
/// one (each range is read whole into memory, then decoded).
const JOINED_RANGE_BYTES: u64 = 1 << 20;

/// Bytes of an Arrow IPC stream's end marker (continuation and a zero length).
const IPC_STREAM_END: u64 = 8;

/// A destination's range in one worker's scratch file.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScratchRange {
    pub(super) destination: u32,
    /// The worker's place among the scratch files.
    pub(super) worker: u32,
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) rows: u64,
}

/// Every destination's ranges in the scratch files, in one allocation sorted by destination,
/// then worker, then stream order: 32 bytes a range and 8 a destination, whatever the
/// number of destinations (at 100,000 destinations a vector per destination and worker took
/// four times as much).
#[derive(Debug)]
pub(super) struct RangeIndex {
    ranges: Vec<ScratchRange>,
    /// Where each destination's ranges start in `ranges`, and their end.
    starts: Vec<usize>,
}

impl RangeIndex {
    /// Destination `p`'s ranges, worker by worker, in stream order.
    pub(super) fn of(&self, p: usize) -> &[ScratchRange] {
        &self.ranges[self.starts[p]..self.starts[p + 1]]
    }

    /// Destination `p`'s bytes in the scratch files.
    pub(super) fn bytes(&self, p: usize) -> u64 {
        self.of(p).iter().map(|r| r.len).sum()
    }
}

impl RangeIndex {
    /// The ranges of the first `used` of `destinations` destinations in the scratch files of
    /// `workers` (sorted) in `dir`, and the scratch data files' paths, by worker.
    ///
    /// # Errors
    /// A scratch file that cannot be read back or whose index is damaged (naming it), or that
    /// holds rows past the `used` destinations.
    pub(super) fn read(
        dir: &Path,
        workers: &[usize],
        destinations: usize,
        used: usize,
    ) -> Result<(Self, Vec<PathBuf>), WriterError> {
        let mut ranges: Vec<ScratchRange> = Vec::new();
        let mut data_paths = Vec::with_capacity(workers.len());
        for (i, &w) in workers.iter().enumerate() {
            let (data, index) = scratch_paths(dir, w);
            let len = std::fs::metadata(&data)
                .map_err(|e| {
                    sink_error(
                        None,
                        partout_input::IoError::system(&data, "cannot be read back", e),
                    )
                })?
                .len();
            let worker = i as u32;
            let mut past = None;
            let count = for_each_shuffle_range(&index, len, |r| {
                if r.destination as usize >= used {
                    past.get_or_insert(r.destination);
                    return Ok(());
                }
                // A stream's end (8 bytes, no rows: written for every destination at the
                // file's end) is left out, since decoding needs none: at 100,000 destinations
                // those ranges were half of the index held.
                if r.rows == 0 && r.len == IPC_STREAM_END {
                    return Ok(());
                }
                // Ranges of a destination that follow each other in the file are read as one,
                // up to a size: a range is read whole into memory.
                match ranges.last_mut() {
                    Some(last)
                        if last.worker == worker
                            && last.destination == r.destination
                            && last.offset + last.len == r.offset
                            && last.len + r.len <= JOINED_RANGE_BYTES =>
                    {
                        last.len += r.len;
                        last.rows += r.rows;
                    }
                    _ => ranges.push(ScratchRange {
                        destination: r.destination,
                        worker,
                        offset: r.offset,
                        len: r.len,
                        rows: r.rows,
                    }),
                }
                Ok(())
            })
            .map_err(|e| sink_error(None, e))?;
            if count as usize != destinations {
                return Err(sink_error(
                    None,
                    format!(
                        "{}: {count} destinations, the output has {}",
                        index.display(),
                        destinations
                    ),
                ));
            }
            if let Some(p) = past {
                return Err(sink_error(
                    Some(p as usize),
                    format!("rows staged past the {used} destinations named"),
                ));
            }
            data_paths.push(data);
        }
        // Stable: each worker's ranges of a destination stay in stream order.
        ranges.sort_by_key(|r| (r.destination, r.worker));
        let mut starts = Vec::with_capacity(used + 1);
        let mut at = 0;
        for p in 0..=used {
            while at < ranges.len() && (ranges[at].destination as usize) < p {
                at += 1;
            }
            starts.push(at);
        }
        Ok((RangeIndex { ranges, starts }, data_paths))
    }
}
