//! Reading staged rows back: each thread's handles on the workers' scratch files
//! ([`ScratchReaders`]), and a destination's ranges decoded batch by batch
//! ([`decode_ranges`]).

use super::index::ScratchRange;
use crate::read_back::{OwnStreamDecoder, check};
use crate::sink_error;
use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use partout_exchange::WriterError;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// Decodes destination `p`'s ranges (sorted by worker), worker by worker, each batch handed to `each` until it
/// returns `false`. Checks that the rows decoded are the rows the index lists.
pub(super) fn decode_ranges(
    p: usize,
    ranges: &[ScratchRange],
    readers: &mut ScratchReaders<'_>,
    each: &mut dyn FnMut(RecordBatch) -> Result<bool, WriterError>,
) -> Result<(), WriterError> {
    let mut bytes = Vec::new();
    for worker_ranges in ranges.chunk_by(|a, b| a.worker == b.worker) {
        let w = worker_ranges[0].worker as usize;
        // Each worker's ranges of a destination are one IPC stream, schema first.
        let mut decoder = OwnStreamDecoder::default();
        let mut expected = 0u64;
        let mut decoded = 0u64;
        for &ScratchRange {
            offset, len, rows, ..
        } in worker_ranges
        {
            expected += rows;
            readers.read(w, offset, len, &mut bytes, p)?;
            // Uncompressed buffers are used in place: the batch holds the bytes read.
            let whole = Buffer::from_vec(std::mem::take(&mut bytes));
            let mut buffer = whole.clone();
            while !buffer.is_empty() {
                let batch = decoder
                    .decode(&mut buffer)
                    .map_err(|e| readers.damaged(w, p, e))?;
                if let Some(batch) = batch {
                    check(&batch).map_err(|e| readers.damaged(w, p, e))?;
                    decoded += batch.num_rows() as u64;
                    if !each(batch)? {
                        return Ok(());
                    }
                }
            }
            drop(buffer);
            // Once the batches are written and gone, the next range is read into the same
            // memory: a fresh allocation per range is memory the allocator hands back to the
            // system and faults in again (a tenth of the time spent writing, measured).
            bytes = whole.into_vec().unwrap_or_default();
        }
        if decoded != expected {
            return Err(readers.damaged(
                w,
                p,
                format!("{decoded} rows decoded where its index says {expected}"),
            ));
        }
    }
    Ok(())
}

/// One thread's handles on the scratch data files, opened on first use.
pub(super) struct ScratchReaders<'a> {
    paths: &'a [PathBuf],
    files: Vec<Option<File>>,
}

impl<'a> ScratchReaders<'a> {
    pub(super) fn new(paths: &'a [PathBuf]) -> Self {
        Self {
            paths,
            files: paths.iter().map(|_| None).collect(),
        }
    }

    /// Reads `len` bytes at `offset` of scratch file `w` into `out` (replacing its contents).
    fn read(
        &mut self,
        w: usize,
        offset: u64,
        len: u64,
        out: &mut Vec<u8>,
        p: usize,
    ) -> Result<(), WriterError> {
        let path = &self.paths[w];
        let failed = |e: std::io::Error| {
            sink_error(
                Some(p),
                partout_input::IoError::system(path, "cannot be read back", e),
            )
        };
        let file = match &mut self.files[w] {
            Some(file) => file,
            slot => slot.insert(File::open(path).map_err(failed)?),
        };
        out.clear();
        out.reserve_exact(len as usize);
        // `take` and `read_to_end`: the buffer is read into, not zeroed first.
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| (&mut *file).take(len).read_to_end(out))
            .and_then(|read| match read as u64 == len {
                true => Ok(()),
                false => Err(std::io::ErrorKind::UnexpectedEof.into()),
            })
            .map_err(failed)
    }

    /// Destination `p`'s ranges in scratch file `w` do not decode: an error naming the file.
    fn damaged(&self, w: usize, p: usize, e: impl std::fmt::Display) -> WriterError {
        sink_error(
            Some(p),
            partout_input::IoError::file(&self.paths[w], format!("damaged scratch file: {e}")),
        )
    }
}
