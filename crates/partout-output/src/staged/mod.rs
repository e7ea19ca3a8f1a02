//! Files written whole from staged rows: [`StagedFiles`], each destination's Parquet file (a
//! [`ParquetFile`](crate::parquet_file::ParquetFile) per part), or its Arrow IPC file when
//! asked ([`StagedFiles::with_ipc_output`]).
//!
//! A Parquet writer holds its open row group in memory (encoded pages, dictionaries) until
//! the row group ends. With one writer open per destination, thousands of destinations under
//! a memory limit leave each a sliver of memory: row groups of a few thousand rows, too small
//! for dictionaries to pay, and at 10,000 destinations no room at all. So rows are staged
//! first, and each destination's file is written whole, afterwards, one writer per thread:
//!
//! ```text
//!  staging  worker w ── flushes ──► .scratch-w.data + .scratch-w.index (a ShuffleFile:
//!                                   each destination's ranges as an Arrow IPC stream)
//!  writing  thread t ── destination p: its ranges of every scratch file, in order
//!                       ─► decoded ─► coalesced ─► ParquetFile ─► part-p.parquet
//!                          (or part-p-00000.parquet, part-p-00001.parquet … rolling over)
//! ```
//!
//! While writing, each thread holds one open row group (bounded by
//! [`ParquetWriterConfig::row_group_bytes`] and the properties' row count), one range's bytes
//! and its decoded batch: memory no longer grows with the destination count. The scratch files are
//! removed once every file is written, and by `Drop` when the output is abandoned.
//!
//! Modules: `index` (where each destination's ranges lie in the scratch files), `scratch`
//! (reading them back), `part` (a destination's files as they are written and closed),
//! `dictionary` (whether a column's dictionary pays).

mod dictionary;
mod index;
mod part;
mod scratch;
mod sort;

use dictionary::dictionary_pays;
use index::{RangeIndex, ScratchRange};
use part::StagedParts;
use scratch::{ScratchReaders, decode_ranges};
use sort::Sorter;
pub use sort::Sorting;

use super::rollover::Rolling;
use super::{
    DICTIONARY_SAMPLE_ROWS, FileList, Rollover, ShuffleFile, contained, io_error, sink_error,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, IntervalUnit, Schema, SchemaRef};
use arrow_select::coalesce::BatchCoalescer;
use parquet::arrow::ArrowSchemaConverter;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use partout_exchange::WriterError;
use partout_format::{Compression, Encoding};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Rows handed to the Parquet writer at once: runs of a few rows (a destination flushed under
/// memory pressure at high fan-out) are gathered first, since each write has a fixed cost per
/// column.
const WRITE_ROWS: usize = 8192;

/// How each destination's Parquet file is written: the writer's configuration, made from
/// what the user chose ([`ParquetSettings`](crate::ParquetSettings)) and what the output
/// needs (row group bytes within the budget, the scratch files' compression).
#[derive(Debug, Clone)]
pub struct ParquetWriterConfig {
    /// The writer's properties: compression, statistics, dictionaries, and the most rows a
    /// row group holds ([`WriterProperties::max_row_group_row_count`]).
    pub properties: WriterProperties,
    /// The most a writer's open row group may hold, by the writer's estimate of its encoded
    /// size: a row group ends at this size or at the properties' row count, whichever comes
    /// first. It replaces the properties' own byte limit.
    pub row_group_bytes: usize,
    /// How staged rows are compressed in the scratch files (Arrow IPC body compression):
    /// none spends no CPU and decodes in place; LZ4 halves the scratch bytes.
    pub staging: Compression,
    /// What the user chose (already in `properties`): a column whose dictionaries were
    /// chosen is not judged by a sample.
    pub chosen: crate::ParquetSettings,
}

/// Parquet files `DIR/{prefix}-{p:05}.parquet`, one per destination, written from rows that
/// workers first stage in scratch files of their own ([`scratch`](Self::scratch)); see the
/// module's documentation. Files are written as `.NAME.partial` and renamed when whole.
pub struct StagedFiles {
    dir: PathBuf,
    prefix: String,
    schema: SchemaRef,
    destinations: usize,
    options: ParquetWriterConfig,
    /// Arrow IPC files written instead of Parquet, when set.
    ipc: Option<Encoding>,
    /// When a destination's file rolls over to its next.
    rollover: Rollover,
    /// The order of rows within each file, when sorted.
    sorting: Option<Sorting>,
    /// Workers whose scratch files were created (removed by `finish`, or on drop).
    scratch: Mutex<Vec<usize>>,
}

impl std::fmt::Debug for StagedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedFiles")
            .field("dir", &self.dir)
            .field("prefix", &self.prefix)
            .field("destinations", &self.destinations)
            .finish_non_exhaustive()
    }
}

impl StagedFiles {
    /// Parquet files for `destinations` destinations of batches of `schema` in `dir`.
    ///
    /// # Errors
    /// [`WriterError::Sink`] when `dir` cannot be created, or when Parquet cannot carry the
    /// schema (checked now, before any row is staged: see [`check_schema`](Self::check_schema)).
    pub fn try_new(
        dir: &Path,
        prefix: &str,
        schema: SchemaRef,
        destinations: usize,
        options: ParquetWriterConfig,
    ) -> Result<Self, WriterError> {
        Self::check_schema(&schema)?;
        std::fs::create_dir_all(dir).map_err(io_error(None))?;
        let properties = options
            .properties
            .into_builder()
            .set_max_row_group_bytes(Some(options.row_group_bytes.max(1)))
            .build();
        Ok(Self {
            dir: dir.to_path_buf(),
            prefix: prefix.to_string(),
            schema,
            destinations,
            options: ParquetWriterConfig {
                properties,
                ..options
            },
            ipc: None,
            rollover: Rollover::default(),
            sorting: None,
            scratch: Mutex::new(Vec::new()),
        })
    }

    /// Writes each destination's file as an Arrow IPC file compressed as `encoding` says
    /// instead of Parquet: still one file per destination, written whole from the staged rows
    /// once the input is consumed, one open at a time per thread.
    ///
    /// # Errors
    /// [`WriterError::Sink`] for an encoding that is not Arrow IPC, or a schema it cannot
    /// carry.
    pub fn with_ipc_output(mut self, encoding: Encoding) -> Result<Self, WriterError> {
        if encoding.format() != partout_format::Format::Ipc {
            return Err(sink_error(
                None,
                format!("staged files are Parquet or Arrow IPC, not {encoding:?}"),
            ));
        }
        encoding.check_schema(&self.schema)?;
        self.ipc = Some(encoding);
        Ok(self)
    }

    /// The same files, each destination's rolling over as `rollover` says (file numbers
    /// before the extension: [`Rollover::file_name`]).
    pub fn with_rollover(mut self, rollover: Rollover) -> Self {
        self.rollover = rollover;
        self
    }

    /// The same files, the rows of each sorted as `sorting` says (within its memory:
    /// [`Sorting::memory`] for each thread writing). Parquet files say so in their row
    /// groups' `sorting_columns` when every key is a column of one leaf.
    ///
    /// # Errors
    /// [`WriterError::Sink`] for a key the schema has no column for.
    pub fn with_sorting(mut self, sorting: Sorting) -> Result<Self, WriterError> {
        if sorting.order.is_empty() {
            self.sorting = None;
            return Ok(self);
        }
        sorting
            .order
            .check_schema(&self.schema)
            .map_err(|e| sink_error(None, e.to_string()))?;
        let columns = sorting.order.parquet_sorting_columns(&self.schema);
        self.options.properties = self
            .options
            .properties
            .clone()
            .into_builder()
            .set_sorting_columns(columns)
            .build();
        self.sorting = Some(sorting);
        Ok(self)
    }

    /// Whether each file's rows are sorted.
    pub(crate) fn is_sorted(&self) -> bool {
        self.sorting.is_some()
    }

    /// Checks that Parquet files can carry batches of `schema`: what the parquet crate's
    /// writer has no Parquet type for (unions, which its schema conversion does not refuse but
    /// panics on) or refuses only once it meets values (month-day-nano intervals) is refused
    /// here, by column, before anything is written.
    ///
    /// # Errors
    /// [`WriterError::Sink`] naming the column and what Parquet cannot carry.
    pub fn check_schema(schema: &Schema) -> Result<(), WriterError> {
        for field in schema.fields() {
            if partout_format::ipc::holds(field.data_type(), &without_parquet_type) {
                return Err(sink_error(
                    None,
                    format!(
                        "Parquet files cannot carry column {:?} of type {}: unions and \
                         month-day-nano intervals have no Parquet type",
                        field.name(),
                        field.data_type()
                    ),
                ));
            }
        }
        ArrowSchemaConverter::new()
            .convert(schema)
            .map(|_| ())
            .map_err(|e| sink_error(None, e))
    }

    /// The name of destination `p`'s file.
    pub fn name(&self, p: usize) -> String {
        let extension = match self.ipc {
            Some(_) => "arrow",
            None => "parquet",
        };
        format!("{}-{p:05}.{extension}", self.prefix)
    }

    /// The batches' schema.
    pub(crate) fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// When a destination's file rolls over to its next.
    pub(crate) fn rollover(&self) -> Rollover {
        self.rollover
    }

    /// Whether each file's column statistics are recorded.
    pub(crate) fn records_statistics(&self) -> bool {
        self.options.chosen.file_statistics()
    }

    /// How many destinations.
    pub(crate) fn destinations(&self) -> usize {
        self.destinations
    }

    /// The directory the files are written in.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where destination `p`'s file `part` is written before it is whole.
    pub(crate) fn partial(&self, p: usize, part: usize) -> PathBuf {
        let name = self.rollover.file_name(&self.name(p), part);
        self.dir.join(format!(".{name}.partial"))
    }

    /// The paths of worker `worker`'s scratch data file and index.
    pub fn scratch_paths(&self, worker: usize) -> (PathBuf, PathBuf) {
        scratch_paths(&self.dir, worker)
    }

    /// Worker `worker`'s scratch file, where its flushes stage rows: the output its
    /// partitioned writer flushes to. Each worker takes one.
    ///
    /// # Errors
    /// When the files cannot be created.
    pub fn scratch(&self, worker: usize) -> Result<ShuffleFile, WriterError> {
        self.scratch
            .lock()
            .map_err(|_| sink_error(None, "a worker panicked while creating its scratch file"))?
            .push(worker);
        ShuffleFile::try_new(
            &self.dir,
            &scratch_name(worker),
            self.schema.clone(),
            self.destinations,
            Encoding::ipc(self.options.staging),
        )
    }

    /// Writes every destination's file from the finished scratch files, on `threads`
    /// threads (largest destinations first, so that no thread is left with a large one at
    /// the end), then removes the scratch files. A destination without rows gets a file of
    /// the schema alone. `cancelled` is asked between destinations.
    ///
    /// # Errors
    /// Scratch files that cannot be read back (each error names the file), Parquet and IO
    /// errors naming the destination; [`WriterError::Failed`] when cancelled. The partial
    /// file of a failed destination is removed; the scratch files are removed on drop.
    pub fn finish(
        self,
        threads: usize,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<FileList>, WriterError> {
        let names: Vec<String> = (0..self.destinations).map(|p| self.name(p)).collect();
        self.finish_named(names, threads, cancelled)
    }

    /// As [`finish`](Self::finish), for the first `names.len()` destinations only, each
    /// written at its name: a path relative to the directory (`year=2024/part-00000.parquet`),
    /// its directories made (rolling over, each file's number before its extension:
    /// [`Rollover::file_name`]). The destinations past them must have received no rows (their
    /// count was an upper bound: destinations discovered as values arrive).
    ///
    /// # Errors
    /// As [`finish`](Self::finish); [`WriterError::Sink`] when more names are given than
    /// destinations, or a destination past the names received rows.
    pub fn finish_named(
        self,
        names: Vec<String>,
        threads: usize,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<FileList>, WriterError> {
        let written = vec![None; names.len()];
        self.finish_rest(names, threads, cancelled, written, None)
    }

    /// As [`finish_named`](Self::finish_named), for the destinations whose file is not
    /// `written` already (one entry per name; a destination written elsewhere has no staged
    /// rows), with `properties` when given (else chosen on a sample of the largest
    /// destination: [`dictionaries_from`](Self::dictionaries_from)).
    pub(crate) fn finish_rest(
        self,
        names: Vec<String>,
        threads: usize,
        cancelled: &(dyn Fn() -> bool + Sync),
        written: Vec<Option<FileList>>,
        properties: Option<WriterProperties>,
    ) -> Result<Vec<FileList>, WriterError> {
        let used = names.len();
        if used > self.destinations || written.len() != used {
            return Err(sink_error(
                None,
                format!(
                    "{used} names and {} files for {} destinations",
                    written.len(),
                    self.destinations
                ),
            ));
        }
        let mut workers = self
            .scratch
            .lock()
            .map_err(|_| sink_error(None, "a worker panicked while creating its scratch file"))?
            .clone();
        workers.sort_unstable();
        // Each destination's ranges: the index, not the rows, is held in memory.
        let (ranges, data_paths) = RangeIndex::read(&self.dir, &workers, self.destinations, used)?;
        if let Some(p) =
            (0..used).find(|&p| written[p].is_some() && ranges.of(p).iter().any(|r| r.rows > 0))
        {
            return Err(sink_error(
                Some(p),
                "its file was written as it was flushed, and rows of it were staged too",
            ));
        }
        let mut order: Vec<usize> = (0..used).filter(|&p| written[p].is_none()).collect();
        order.sort_by_key(|&p| std::cmp::Reverse(ranges.bytes(p)));
        let properties = match (properties, order.first().filter(|_| self.ipc.is_none())) {
            (Some(properties), _) => properties,
            (None, Some(&p)) => contained(p, || {
                self.with_dictionaries_that_pay(
                    p,
                    ranges.of(p),
                    &mut ScratchReaders::new(&data_paths),
                )
            })?,
            (None, None) => self.options.properties.clone(),
        };

        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let files: Mutex<Vec<Option<FileList>>> = Mutex::new(written);
        let errors: Mutex<Vec<WriterError>> = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..threads.clamp(1, used.max(1)) {
                scope.spawn(|| {
                    let mut readers = ScratchReaders::new(&data_paths);
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        if cancelled() {
                            stop.store(true, Ordering::Relaxed);
                            push(&errors, WriterError::Failed);
                            return;
                        }
                        let Some(&p) = order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            return;
                        };
                        match self.write_destination(
                            p,
                            &names[p],
                            ranges.of(p),
                            &mut readers,
                            &properties,
                        ) {
                            Ok(file) => {
                                if let Ok(mut files) = files.lock() {
                                    files[p] = Some(file);
                                }
                            }
                            Err(e) => {
                                stop.store(true, Ordering::Relaxed);
                                push(&errors, e);
                                return;
                            }
                        }
                    }
                });
            }
        });
        if let Some(e) = errors.into_inner().ok().and_then(|e| e.into_iter().next()) {
            return Err(e);
        }
        let files = files
            .into_inner()
            .map_err(|_| sink_error(None, "a thread writing Parquet files panicked"))?;
        // A destination's one file takes its name from `names`, moved, not copied: at
        // 100,000 destinations the names are megabytes.
        let files = files
            .into_iter()
            .zip(names)
            .enumerate()
            .map(|(p, (f, name))| {
                let mut f = f.ok_or_else(|| sink_error(Some(p), "its file was not written"))?;
                if let [one] = f.as_mut_slice()
                    && one.name.is_empty()
                {
                    one.name = name;
                }
                Ok(f)
            })
            .collect::<Result<Vec<_>, WriterError>>()?;
        // Dropping removes the scratch files.
        Ok(files)
    }

    /// Writes destination `p`'s files, named after `name`, from its ranges: one, or several
    /// as they roll over. A destination without rows gets one file of the schema alone. A
    /// file not ended is removed when dropped (a failure, a panic contained).
    fn write_destination(
        &self,
        p: usize,
        name: &str,
        ranges: &[ScratchRange],
        readers: &mut ScratchReaders<'_>,
        properties: &WriterProperties,
    ) -> Result<FileList, WriterError> {
        let mut parts = StagedParts {
            staged: self,
            p,
            name,
            properties,
        };
        contained(p, || {
            let mut files = Rolling::new(self.rollover);
            let mut write = |batch: &RecordBatch| files.write(batch, &mut parts);
            match &self.sorting {
                None => self.gather_ranges(p, ranges, readers, &mut write)?,
                Some(sorting) => {
                    let mut sorter = Sorter::try_new(p, self.schema.clone(), sorting, &self.dir)?;
                    decode_ranges(p, ranges, readers, &mut |batch| {
                        sorter.push(batch).map(|()| true)
                    })?;
                    sorter.finish(&mut write)?;
                }
            }
            files.finish(&mut parts, true)
        })
    }

    /// Decodes destination `p`'s ranges and hands them to `write` gathered into batches of
    /// [`WRITE_ROWS`] rows (a range of a few rows costs each write its fixed cost per column).
    fn gather_ranges(
        &self,
        p: usize,
        ranges: &[ScratchRange],
        readers: &mut ScratchReaders<'_>,
        write: &mut dyn FnMut(&RecordBatch) -> Result<(), WriterError>,
    ) -> Result<(), WriterError> {
        let mut coalescer = BatchCoalescer::new(self.schema.clone(), WRITE_ROWS)
            .with_biggest_coalesce_batch_size(Some(WRITE_ROWS / 2));
        let mut push = |batch: Option<RecordBatch>| -> Result<(), WriterError> {
            match batch {
                Some(batch) => coalescer.push_batch(batch),
                None => coalescer.finish_buffered_batch(),
            }
            .map_err(|e| sink_error(Some(p), e))?;
            while let Some(batch) = coalescer.next_completed_batch() {
                write(&batch)?;
            }
            Ok(())
        };
        decode_ranges(p, ranges, readers, &mut |batch| {
            push(Some(batch)).map(|()| true)
        })?;
        push(None)
    }

    /// The properties with dictionaries only for the columns where they pay, judged on a
    /// sample of destination `p` (the largest): see [`dictionary_pays`].
    fn with_dictionaries_that_pay(
        &self,
        p: usize,
        ranges: &[ScratchRange],
        readers: &mut ScratchReaders<'_>,
    ) -> Result<WriterProperties, WriterError> {
        let mut sample = Vec::new();
        let mut rows = 0;
        decode_ranges(p, ranges, readers, &mut |batch| {
            rows += batch.num_rows();
            sample.push(batch);
            Ok(rows < DICTIONARY_SAMPLE_ROWS)
        })?;
        Ok(self.dictionaries_from(&sample))
    }

    /// The properties with dictionaries only for the columns where they pay, judged on
    /// `sample`: see [`dictionary_pays`].
    pub(crate) fn dictionaries_from<'a>(
        &self,
        sample: impl IntoIterator<Item = &'a RecordBatch> + Clone,
    ) -> WriterProperties {
        let mut properties = self.options.properties.clone().into_builder();
        for (c, field) in self.schema.fields().iter().enumerate() {
            if self.options.chosen.chooses_dictionary(field.name()) {
                continue;
            }
            let columns: Vec<&dyn Array> = sample
                .clone()
                .into_iter()
                .map(|b| b.column(c).as_ref())
                .collect();
            if dictionary_pays(&columns) == Some(false) {
                let path = ColumnPath::new(vec![field.name().clone()]);
                properties = properties.set_column_dictionary_enabled(path, false);
            }
        }
        properties.build()
    }
}

impl Drop for StagedFiles {
    /// Removes the scratch files, whether the files were written or the output abandoned.
    fn drop(&mut self) {
        let workers = match self.scratch.get_mut() {
            Ok(workers) => std::mem::take(workers),
            Err(poisoned) => std::mem::take(poisoned.into_inner()),
        };
        for w in workers {
            let (data, index) = self.scratch_paths(w);
            let _ = std::fs::remove_file(data);
            let _ = std::fs::remove_file(index);
        }
    }
}

/// Types the parquet crate's writer has no Parquet type for.
fn without_parquet_type(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Union(..) | DataType::Interval(IntervalUnit::MonthDayNano)
    )
}

/// The paths of worker `worker`'s scratch data file and index in `dir`.
fn scratch_paths(dir: &Path, worker: usize) -> (PathBuf, PathBuf) {
    let name = scratch_name(worker);
    (
        dir.join(format!("{name}.data")),
        dir.join(format!("{name}.index")),
    )
}

/// The name of worker `worker`'s scratch files, without extension: hidden, like partial files.
fn scratch_name(worker: usize) -> String {
    format!(".scratch-{worker:03}")
}

fn push(errors: &Mutex<Vec<WriterError>>, e: WriterError) {
    if let Ok(mut errors) = errors.lock() {
        errors.push(e);
    }
}
