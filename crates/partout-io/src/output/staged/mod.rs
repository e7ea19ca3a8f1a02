//! Parquet output through staging: [`StagedParquet`] (which writes Arrow IPC files the same
//! way when asked: [`StagedParquet::with_ipc_output`]).
//!
//! A Parquet writer holds its open row group in memory (encoded pages, dictionaries) until
//! the row group ends. With one writer open per destination, thousands of destinations under
//! a memory limit leave each a sliver of memory: row groups of a few thousand rows, too small
//! for dictionaries to pay, and at 10,000 destinations no room at all. So rows are staged
//! first, and each destination's file is written whole, afterwards, one writer per thread:
//!
//! ```text
//!  staging  worker w ── flushes ──► .scratch-w.data + .scratch-w.index (a ShuffleFile:
//!                                   each destination's runs as an Arrow IPC stream)
//!  writing  thread t ── destination p: its runs of every scratch file, in order
//!                       ─► decoded ─► coalesced ─► ArrowWriter ─► part-p.parquet
//! ```
//!
//! While writing, each thread holds one open row group (bounded by
//! [`ParquetOptions::row_group_bytes`] and the properties' row count), one run's bytes and its
//! decoded batch: memory no longer grows with the destination count. The scratch files are
//! removed once every file is written, and by `Drop` when the output is abandoned.
//!
//! Modules: `index` (where each destination's runs lie in the scratch files), `scratch`
//! (reading them back).

mod index;
mod scratch;

use index::{Run, RunIndex};
use scratch::{ScratchReaders, decode_runs};

use super::{DestinationFile, ShuffleFile, io_error, sink_error, statistics};
use crate::panic_message;
use arrow_array::{Array, RecordBatch};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{DataType, IntervalUnit, Schema, SchemaRef};
use arrow_select::coalesce::BatchCoalescer;
use parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use partout_exchange::WriterError;
use partout_format::{Compression, Encoding};
use std::fs::File;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Rows of the largest destination sampled to choose the columns worth a dictionary.
const DICTIONARY_SAMPLE_ROWS: usize = 1 << 16;

/// A column is dictionary-encoded when its sampled values repeat at least this many times on
/// average (see [`dictionary_pays`]).
const DICTIONARY_MIN_REPEATS: usize = 5;

/// Rows handed to the Parquet writer at once: runs of a few rows (a destination flushed under
/// memory pressure at high fan-out) are gathered first, since each write has a fixed cost per
/// column.
const WRITE_ROWS: usize = 8192;

/// How each destination's Parquet file is written.
#[derive(Debug, Clone)]
pub struct ParquetOptions {
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
    pub chosen: crate::output::ParquetSettings,
}

/// Parquet files `DIR/{prefix}-{p:05}.parquet`, one per destination, written from rows that
/// workers first stage in scratch files of their own ([`scratch`](Self::scratch)); see the
/// module's documentation. Files are written as `.NAME.partial` and renamed when whole.
pub struct StagedParquet {
    dir: PathBuf,
    prefix: String,
    schema: SchemaRef,
    destinations: usize,
    options: ParquetOptions,
    /// Arrow IPC streams written instead of Parquet, when set.
    ipc: Option<Encoding>,
    /// Workers whose scratch files were created (removed by `finish`, or on drop).
    scratch: Mutex<Vec<usize>>,
}

impl std::fmt::Debug for StagedParquet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedParquet")
            .field("dir", &self.dir)
            .field("prefix", &self.prefix)
            .field("destinations", &self.destinations)
            .finish_non_exhaustive()
    }
}

impl StagedParquet {
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
        options: ParquetOptions,
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
            options: ParquetOptions {
                properties,
                ..options
            },
            ipc: None,
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

    /// Where destination `p`'s file is written before it is whole.
    pub(crate) fn partial(&self, p: usize) -> PathBuf {
        self.dir.join(format!(".{}.partial", self.name(p)))
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
    ) -> Result<Vec<DestinationFile>, WriterError> {
        let names: Vec<String> = (0..self.destinations).map(|p| self.name(p)).collect();
        self.finish_named(names, threads, cancelled)
    }

    /// As [`finish`](Self::finish), for the first `names.len()` destinations only, each
    /// written at its name: a path relative to the directory (`year=2024/part-00000.parquet`),
    /// its directories made. The destinations past them must have received no rows (their
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
    ) -> Result<Vec<DestinationFile>, WriterError> {
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
        written: Vec<Option<DestinationFile>>,
        properties: Option<WriterProperties>,
    ) -> Result<Vec<DestinationFile>, WriterError> {
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
        // Each destination's runs: the index, not the rows, is held in memory.
        let (runs, data_paths) = RunIndex::read(&self.dir, &workers, self.destinations, used)?;
        if let Some(p) =
            (0..used).find(|&p| written[p].is_some() && runs.of(p).iter().any(|r| r.rows > 0))
        {
            return Err(sink_error(
                Some(p),
                "its file was written as it was flushed, and rows of it were staged too",
            ));
        }
        let mut order: Vec<usize> = (0..used).filter(|&p| written[p].is_none()).collect();
        order.sort_by_key(|&p| std::cmp::Reverse(runs.bytes(p)));
        let properties = match (properties, order.first().filter(|_| self.ipc.is_none())) {
            (Some(properties), _) => properties,
            (None, Some(&p)) => contained(p, || {
                self.with_dictionaries_that_pay(
                    p,
                    runs.of(p),
                    &mut ScratchReaders::new(&data_paths),
                )
            })?,
            (None, None) => self.options.properties.clone(),
        };

        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let files: Mutex<Vec<Option<DestinationFile>>> = Mutex::new(written);
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
                            runs.of(p),
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
        // The names are moved into the results, not copied.
        let files = files
            .into_iter()
            .zip(names)
            .enumerate()
            .map(|(p, (f, name))| match f {
                Some(f) => Ok(DestinationFile {
                    name: Some(name),
                    ..f
                }),
                None => Err(sink_error(Some(p), "its file was not written")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Dropping removes the scratch files.
        Ok(files)
    }

    /// Writes destination `p`'s file, `name`, from its runs, its partial file removed on
    /// failure.
    fn write_destination(
        &self,
        p: usize,
        name: &str,
        runs: &[Run],
        readers: &mut ScratchReaders<'_>,
        properties: &WriterProperties,
    ) -> Result<DestinationFile, WriterError> {
        let partial = self.partial(p);
        let written = contained(p, || {
            self.write_partial(p, runs, readers, properties, &partial)
        });
        let file = written.and_then(|file| {
            let path = self.dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io_error(Some(p)))?;
            }
            std::fs::rename(&partial, &path).map_err(io_error(Some(p)))?;
            Ok(file)
        });
        if file.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        file
    }

    /// Writes `partial` from the runs with `properties`: its size, and for Parquet each row
    /// group's rows and each column's statistics (no name yet).
    fn write_partial(
        &self,
        p: usize,
        runs: &[Run],
        readers: &mut ScratchReaders<'_>,
        properties: &WriterProperties,
        partial: &Path,
    ) -> Result<DestinationFile, WriterError> {
        if let Some(encoding) = self.ipc {
            return self.write_ipc(p, runs, readers, encoding, partial);
        }
        let parquet = |e: parquet::errors::ParquetError| sink_error(Some(p), e);
        let file = File::create(partial).map_err(io_error(Some(p)))?;
        let mut writer = ArrowWriter::try_new(file, self.schema.clone(), Some(properties.clone()))
            .map_err(parquet)?;
        self.gather_runs(p, runs, readers, &mut |batch| {
            writer.write(batch).map_err(parquet)
        })?;
        let metadata = writer.finish().map_err(parquet)?;
        let row_groups = metadata
            .row_groups()
            .iter()
            .map(|rg| rg.num_rows() as u64)
            .collect();
        Ok(DestinationFile {
            name: None,
            bytes: writer.bytes_written() as u64,
            row_groups: Some(row_groups),
            columns: (self.options.chosen.file_statistics())
                .then(|| statistics::of_file(&self.schema, &metadata)),
        })
    }

    /// Decodes destination `p`'s runs and hands them to `write` gathered into batches of
    /// [`WRITE_ROWS`] rows (a run of a few rows costs each write its fixed cost per column).
    fn gather_runs(
        &self,
        p: usize,
        runs: &[Run],
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
        decode_runs(p, runs, readers, &mut |batch| {
            push(Some(batch)).map(|()| true)
        })?;
        push(None)
    }

    /// Writes `partial` from the runs as one Arrow IPC file (the format dataset readers
    /// take: pyarrow's `format="ipc"`, Polars' `scan_ipc`) compressed as `encoding` says,
    /// batches gathered to [`WRITE_ROWS`] rows; its size (no row groups or statistics).
    fn write_ipc(
        &self,
        p: usize,
        runs: &[Run],
        readers: &mut ScratchReaders<'_>,
        encoding: Encoding,
        partial: &Path,
    ) -> Result<DestinationFile, WriterError> {
        let arrow = |e: arrow_schema::ArrowError| sink_error(Some(p), e);
        let file = File::create(partial).map_err(io_error(Some(p)))?;
        let file = std::io::BufWriter::with_capacity(256 << 10, file);
        let options = partout_format::ipc::ipc_options(encoding.compression())
            .map_err(|e| sink_error(Some(p), e))?;
        let mut writer =
            FileWriter::try_new_with_options(file, &self.schema, options).map_err(arrow)?;
        self.gather_runs(p, runs, readers, &mut |batch| {
            writer.write(batch).map_err(arrow)
        })?;
        writer.finish().map_err(arrow)?;
        let file = writer.into_inner().map_err(arrow)?;
        let file = file
            .into_inner()
            .map_err(|e| io_error(Some(p))(e.into_error()))?;
        Ok(DestinationFile {
            name: None,
            bytes: file.metadata().map_err(io_error(Some(p)))?.len(),
            row_groups: None,
            columns: None,
        })
    }

    /// The properties with dictionaries only for the columns where they pay, judged on a
    /// sample of destination `p` (the largest): see [`dictionary_pays`].
    fn with_dictionaries_that_pay(
        &self,
        p: usize,
        runs: &[Run],
        readers: &mut ScratchReaders<'_>,
    ) -> Result<WriterProperties, WriterError> {
        let mut sample = Vec::new();
        let mut rows = 0;
        decode_runs(p, runs, readers, &mut |batch| {
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

/// Runs `work` on destination `p`'s rows; a panic in a format crate (arrow-ipc meeting a
/// damaged scratch file) is an error naming the destination.
fn contained<T>(p: usize, work: impl FnOnce() -> Result<T, WriterError>) -> Result<T, WriterError> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        Err(sink_error(
            Some(p),
            format!("writing its file failed: {}", panic_message(panic.as_ref())),
        ))
    })
}

/// Whether dictionary encoding pays for a column, judged on a sample of its values (the
/// chunks `arrays`): when values repeat at least [`DICTIONARY_MIN_REPEATS`] times on average.
/// Otherwise the dictionary holds most values once more, the indices are wide, and the
/// encoding costs a hash of every value: on lineitem, `l_partkey`, `l_extendedprice` and
/// `l_comment` (mostly distinct) and `l_orderkey` (four rows a key, in runs that plain
/// encoding and Snappy compress better) came out larger with dictionaries, and took a third of
/// the time spent writing. `None` for types judged by parquet's writer alone (nested, boolean,
/// dictionary columns) and for a sample without values.
fn dictionary_pays(arrays: &[&dyn Array]) -> Option<bool> {
    use arrow_array::cast::AsArray;
    use arrow_schema::DataType as T;
    use std::hash::BuildHasher;
    let hasher = std::collections::hash_map::RandomState::new();
    let mut distinct = std::collections::HashSet::new();
    let mut values = 0usize;
    let mut add = |bytes: &[u8]| {
        distinct.insert(hasher.hash_one(bytes));
        values += 1;
    };
    for array in arrays {
        let valid = |i: usize| array.is_valid(i);
        // The `_opt` casts: a type that does not match its array is a sample left to the
        // writer, never a panic.
        match array.data_type() {
            T::Utf8 => {
                let a = array.as_string_opt::<i32>()?;
                (0..a.len())
                    .filter(|&i| valid(i))
                    .for_each(|i| add(a.value(i).as_bytes()));
            }
            T::LargeUtf8 => {
                let a = array.as_string_opt::<i64>()?;
                (0..a.len())
                    .filter(|&i| valid(i))
                    .for_each(|i| add(a.value(i).as_bytes()));
            }
            T::Utf8View => {
                let a = array.as_string_view_opt()?;
                (0..a.len())
                    .filter(|&i| valid(i))
                    .for_each(|i| add(a.value(i).as_bytes()));
            }
            T::Binary => {
                let a = array.as_binary_opt::<i32>()?;
                (0..a.len())
                    .filter(|&i| valid(i))
                    .for_each(|i| add(a.value(i)));
            }
            T::LargeBinary => {
                let a = array.as_binary_opt::<i64>()?;
                (0..a.len())
                    .filter(|&i| valid(i))
                    .for_each(|i| add(a.value(i)));
            }
            T::BinaryView => {
                let a = array.as_binary_view_opt()?;
                (0..a.len())
                    .filter(|&i| valid(i))
                    .for_each(|i| add(a.value(i)));
            }
            T::FixedSizeBinary(_) => {
                let a = array.as_fixed_size_binary_opt()?;
                (0..a.len())
                    .filter(|&i| valid(i))
                    .for_each(|i| add(a.value(i)));
            }
            t if t.is_primitive() => {
                let width = t.primitive_width()?;
                let data = array.to_data();
                let buffer = data.buffers().first()?;
                let start = data.offset() * width;
                let bytes = buffer.as_slice().get(start..start + data.len() * width)?;
                for (i, value) in bytes.chunks_exact(width).enumerate() {
                    if valid(i) {
                        add(value);
                    }
                }
            }
            _ => return None,
        }
    }
    (values > 0).then(|| distinct.len() * DICTIONARY_MIN_REPEATS <= values)
}

impl Drop for StagedParquet {
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
