//! The files layout of streams: [`DestinationFiles`], one file per destination (an Arrow IPC
//! stream or Presto pages; several when they roll over at a size) shared by every worker,
//! each destination behind its own lock.

use crate::rollover::{PartFile, Parts, Rolling};
use crate::{DestinationFile, FileList, Partial, Rollover, extension, io_error, sink_error};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use partout_exchange::{BatchSink, WriterError};
use partout_format::{Encoding, Format, StreamEncoder};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A destination's files: those written, the one open.
struct Slot {
    files: Rolling<StreamPart>,
    /// A write failed, or the files were ended: no more writes.
    done: bool,
    /// Why a write failed.
    failure: Option<String>,
}

/// A destination's open stream file, written as `.NAME.partial` (removed when dropped before
/// it is renamed into place).
struct StreamPart {
    file: File,
    encoder: StreamEncoder,
    rows: u64,
    bytes: u64,
    partial: Partial,
}

impl PartFile for StreamPart {
    fn rows(&self) -> u64 {
        self.rows
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Destination `p`'s way to open, write and close its stream files, with a writer's scratch
/// buffer.
struct StreamParts<'a> {
    files: &'a DestinationFiles,
    p: usize,
    out: &'a mut Vec<u8>,
}

impl Parts for StreamParts<'_> {
    type File = StreamPart;
    type Ended = DestinationFile;

    fn open(&mut self, part: usize) -> Result<StreamPart, WriterError> {
        let partial = Partial::new(self.files.partial(self.p, part));
        let file = File::create(partial.path()).map_err(io_error(Some(self.p)))?;
        Ok(StreamPart {
            file,
            encoder: StreamEncoder::try_new(self.files.schema.clone(), self.files.encoding)?,
            rows: 0,
            bytes: 0,
            partial,
        })
    }

    fn write(&mut self, file: &mut StreamPart, batch: &RecordBatch) -> Result<(), WriterError> {
        self.out.clear();
        file.encoder.encode(batch, self.out)?;
        file.file
            .write_all(self.out)
            .map_err(io_error(Some(self.p)))?;
        file.bytes += self.out.len() as u64;
        file.rows += batch.num_rows() as u64;
        Ok(())
    }

    fn close(&mut self, mut file: StreamPart, part: usize) -> Result<DestinationFile, WriterError> {
        let p = self.p;
        let mut end = Vec::new();
        let encoder = std::mem::replace(
            &mut file.encoder,
            StreamEncoder::try_new(self.files.schema.clone(), self.files.encoding)?,
        );
        encoder.finish(&mut end)?;
        file.file.write_all(&end).map_err(io_error(Some(p)))?;
        let name = self.files.name(p, part);
        file.partial
            .place(&self.files.dir.join(&name))
            .map_err(io_error(Some(p)))?;
        Ok(DestinationFile {
            name,
            rows: file.rows,
            bytes: file.bytes + end.len() as u64,
            row_groups: None,
            columns: None,
        })
    }
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
    rollover: Rollover,
    slots: Vec<Mutex<Slot>>,
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
            rollover: Rollover::default(),
            slots: (0..destinations)
                .map(|_| {
                    Mutex::new(Slot {
                        files: Rolling::new(Rollover::default()),
                        done: false,
                        failure: None,
                    })
                })
                .collect(),
        })
    }

    /// The same files, each destination's rolling over as `rollover` says.
    pub fn with_rollover(mut self, rollover: Rollover) -> Self {
        self.rollover = rollover;
        for slot in &mut self.slots {
            if let Ok(slot) = slot.get_mut() {
                slot.files = Rolling::new(rollover);
            }
        }
        self
    }

    /// The name of destination `p`'s finished file `part` (`part-00003.arrows`; rolling over,
    /// `part-00003-00001.arrows`).
    pub fn name(&self, p: usize, part: usize) -> String {
        let name = format!(
            "{}-{p:05}.{}",
            self.prefix,
            extension(self.encoding.format())
        );
        self.rollover.file_name(&name, part)
    }

    fn partial(&self, p: usize, part: usize) -> PathBuf {
        self.dir.join(format!(".{}.partial", self.name(p, part)))
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
        crate::lock_destination(&self.slots, p)
    }

    fn write(&self, p: usize, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<u64, WriterError> {
        let mut slot = self.lock(p)?;
        if slot.done {
            return Err(match &slot.failure {
                Some(cause) => crate::failed_earlier(p, cause),
                None => sink_error(Some(p), "its file is already closed"),
            });
        }
        let mut parts = StreamParts {
            files: self,
            p,
            out,
        };
        let before = slot.files.bytes();
        let written = slot.files.write(batch, &mut parts);
        if let Err(e) = &written {
            slot.done = true;
            slot.failure = Some(crate::causes(e));
        }
        written.map(|()| slot.files.bytes() - before)
    }

    /// Ends every file (a destination without rows gets a stream of the schema alone, but
    /// for Presto pages, which need none) and renames them into place, on `threads` threads.
    ///
    /// # Errors
    /// Encoding and IO errors; the partial files are removed then.
    pub fn finish(self, threads: usize) -> Result<Vec<FileList>, WriterError> {
        // Ending thousands of files is thousands of system calls: spread over threads.
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<Vec<(usize, Result<FileList, WriterError>)>> =
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
        let mut files: Vec<Option<FileList>> = vec![None; self.slots.len()];
        for (p, result) in results.into_iter().flatten() {
            files[p] = Some(result?);
        }
        files
            .into_iter()
            .enumerate()
            .map(|(p, file)| file.ok_or_else(|| sink_error(Some(p), "its file was not finished")))
            .collect()
    }

    /// Ends destination `p`'s files: a destination without rows gets a stream of the schema
    /// alone, but for Presto pages, which need none.
    fn finish_one(&self, p: usize) -> Result<FileList, WriterError> {
        let mut slot = self.lock(p)?;
        if std::mem::replace(&mut slot.done, true) {
            return Err(sink_error(Some(p), "a write to it failed earlier"));
        }
        let files = std::mem::replace(&mut slot.files, Rolling::new(self.rollover));
        let mut out = Vec::new();
        let mut parts = StreamParts {
            files: self,
            p,
            out: &mut out,
        };
        files.finish(&mut parts, self.encoding.format() != Format::Presto)
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
