//! The files layout of streams: [`DestinationFiles`], one file per destination (an Arrow IPC
//! stream or Presto pages) shared by every worker, each destination behind its own lock.

use super::{DestinationFile, extension, io_error, sink_error};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_exchange::{BatchSink, WriterError};
use partout_format::{Encoding, Format, StreamEncoder};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A destination's open file.
enum Slot {
    Unopened,
    Stream {
        file: File,
        encoder: StreamEncoder,
        bytes: u64,
    },
    /// Finished, or failed: no more writes.
    Done,
}

/// One file per destination in a directory, written by any number of workers at once: each
/// destination's file is behind its own lock, taken only to write a flushed batch (encoding
/// included, so that several destinations encode in parallel), never on the row path.
/// Files are written as `.NAME.partial` and renamed by [`finish`](Self::finish).
pub struct DestinationFiles {
    dir: PathBuf,
    prefix: String,
    schema: SchemaRef,
    encoding: Encoding,
    slots: Vec<Mutex<Slot>>,
    finished: bool,
}

impl std::fmt::Debug for DestinationFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DestinationFiles")
            .field("dir", &self.dir)
            .field("prefix", &self.prefix)
            .field("destinations", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl DestinationFiles {
    /// Files `DIR/{prefix}-{p:05}.EXT` for `destinations` destinations of batches of `schema`.
    ///
    /// # Errors
    /// When `dir` cannot be created; [`WriterError::Encode`] for a schema Presto pages cannot
    /// carry.
    pub fn try_new(
        dir: &Path,
        prefix: &str,
        schema: SchemaRef,
        destinations: usize,
        encoding: Encoding,
    ) -> Result<Self, WriterError> {
        encoding.check_schema(&schema)?;
        std::fs::create_dir_all(dir).map_err(io_error(None))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            prefix: prefix.to_string(),
            schema,
            encoding,
            slots: (0..destinations)
                .map(|_| Mutex::new(Slot::Unopened))
                .collect(),
            finished: false,
        })
    }

    /// The name of destination `p`'s finished file.
    pub fn name(&self, p: usize) -> String {
        format!(
            "{}-{p:05}.{}",
            self.prefix,
            extension(self.encoding.format())
        )
    }

    fn partial(&self, p: usize) -> PathBuf {
        self.dir.join(format!(".{}.partial", self.name(p)))
    }

    /// A writer's handle: a [`BatchSink`] whose batches go to these files, with its own
    /// scratch buffer. Its `finish` does nothing; [`finish`](Self::finish) ends the files.
    pub fn handle(&self) -> FilesHandle<'_> {
        FilesHandle {
            files: self,
            out: Vec::new(),
        }
    }

    fn lock(&self, p: usize) -> Result<MutexGuard<'_, Slot>, WriterError> {
        super::lock_destination(&self.slots, p)
    }

    fn open(&self, p: usize) -> Result<Slot, WriterError> {
        let file = File::create(self.partial(p)).map_err(io_error(Some(p)))?;
        Ok(Slot::Stream {
            file,
            encoder: StreamEncoder::try_new(self.schema.clone(), self.encoding)?,
            bytes: 0,
        })
    }

    fn write(&self, p: usize, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<u64, WriterError> {
        let mut slot = self.lock(p)?;
        if matches!(*slot, Slot::Unopened) {
            *slot = self.open(p)?;
        }
        let written = match &mut *slot {
            Slot::Stream {
                file,
                encoder,
                bytes,
            } => {
                out.clear();
                encoder.encode(batch, out)?;
                file.write_all(out).map_err(io_error(Some(p)))?;
                *bytes += out.len() as u64;
                Ok(out.len() as u64)
            }
            Slot::Unopened | Slot::Done => Err(sink_error(Some(p), "its file is already closed")),
        };
        if written.is_err() {
            *slot = Slot::Done;
        }
        written
    }

    /// Ends every file (a destination without rows gets a stream of the schema alone, but
    /// for Presto pages, which need none) and renames them into place, on `threads` threads.
    ///
    /// # Errors
    /// Encoding and IO errors; the partial files are removed then.
    pub fn finish(mut self, threads: usize) -> Result<Vec<DestinationFile>, WriterError> {
        let files = self.finish_files(threads)?;
        self.finished = true;
        Ok(files)
    }

    fn finish_files(&self, threads: usize) -> Result<Vec<DestinationFile>, WriterError> {
        // Ending thousands of files is thousands of system calls: spread over threads.
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<Vec<(usize, Result<DestinationFile, WriterError>)>> =
            std::thread::scope(|scope| {
                let workers: Vec<_> = (0..threads.clamp(1, self.slots.len().max(1)))
                    .map(|_| {
                        scope.spawn(|| {
                            let mut done = Vec::new();
                            loop {
                                let p = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                if p >= self.slots.len() {
                                    return done;
                                }
                                let result = self.finish_one(p);
                                let failed = result.is_err();
                                done.push((p, result));
                                if failed {
                                    return done;
                                }
                            }
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|w| w.join().unwrap_or_default())
                    .collect()
            });
        let mut files: Vec<Option<DestinationFile>> = vec![None; self.slots.len()];
        for (p, result) in results.into_iter().flatten() {
            files[p] = Some(result?);
        }
        files
            .into_iter()
            .enumerate()
            .map(|(p, file)| file.ok_or_else(|| sink_error(Some(p), "its file was not finished")))
            .collect()
    }

    fn finish_one(&self, p: usize) -> Result<DestinationFile, WriterError> {
        let mut slot = self.lock(p)?;
        if matches!(*slot, Slot::Unopened) {
            if self.encoding.format() == Format::Presto {
                return Ok(DestinationFile {
                    name: None,
                    bytes: 0,
                    row_groups: None,
                    columns: None,
                });
            }
            *slot = self.open(p)?;
        }
        let bytes = match std::mem::replace(&mut *slot, Slot::Done) {
            Slot::Stream {
                mut file,
                encoder,
                bytes,
            } => {
                let mut end = Vec::new();
                encoder.finish(&mut end)?;
                file.write_all(&end).map_err(io_error(Some(p)))?;
                bytes + end.len() as u64
            }
            Slot::Unopened | Slot::Done => {
                return Err(sink_error(Some(p), "a write to it failed earlier"));
            }
        };
        std::fs::rename(self.partial(p), self.dir.join(self.name(p))).map_err(io_error(Some(p)))?;
        Ok(DestinationFile {
            name: Some(self.name(p)),
            bytes,
            row_groups: None,
            columns: None,
        })
    }
}

impl Drop for DestinationFiles {
    /// Unless finished, the partial files are removed: nothing half-written is left behind.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        for p in 0..self.slots.len() {
            let touched = self
                .slots
                .get_mut(p)
                .map(|slot| !matches!(slot.get_mut(), Ok(Slot::Unopened)))
                .unwrap_or(false);
            if touched {
                let _ = std::fs::remove_file(self.partial(p));
            }
        }
    }
}

/// One writer's way into [`DestinationFiles`].
#[derive(Debug)]
pub struct FilesHandle<'a> {
    files: &'a DestinationFiles,
    out: Vec<u8>,
}

impl BatchSink for FilesHandle<'_> {
    fn write_batch(&mut self, destination: usize, batch: &RecordBatch) -> Result<u64, WriterError> {
        self.files.write(destination, batch, &mut self.out)
    }

    fn finish(&mut self, _destination_bytes: &mut [u64]) -> Result<(), WriterError> {
        Ok(())
    }
}
