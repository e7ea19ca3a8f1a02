//! [`Job`]: the options checked against the inputs, once, before anything is written.
//!
//! ```text
//!  JobOptions ─► Job::try_new: the output spec (partout_output), the memory budget, the
//!                inputs cut into frames, the partitioning (crate::partitioning) or the values'
//!                table (crate::by_value), every check against the schema
//! ```
//!
//! How each layout and format is written is the output layer's
//! ([`partout_output::OutputSpec::create`]); the job chooses nothing there. The run itself is
//! `run.rs`'s.

use crate::budget::{BudgetExt, Discovered};
use crate::by_value::{self, ByValue};
use crate::error::{JobError, Result, writing};
use crate::options::{JobOptions, Scheme};
use crate::partitioning::partitioning;
use crate::stream::StreamInput;
use arrow_schema::SchemaRef;
use partout_core::ids::Partitioning;
use partout_exchange::{Flush, PartitionedWriter, WriterOptions};
use partout_input::{Frames, InputFile, discover_in, plan_frames_by};
use partout_output::RunOptions;
use partout_output::manifest::Budget;
use partout_output::{Location, OutputSpec};
use partout_output::{RunShape, check_compatible};
use std::path::Path;
use std::time::Instant;

/// Partitioning by value, where more values are allowed than the workers' buffers could give
/// a useful share each: past `past` destinations met, a worker hands what it buffered to the
/// output and spills sorted runs with `writer` and `runs` for the rest of the run.
#[derive(Debug, Clone)]
pub(crate) struct Turn {
    pub(crate) past: usize,
    pub(crate) writer: WriterOptions,
    pub(crate) runs: RunOptions,
}

/// A repartition job, checked and ready to run.
#[derive(Debug)]
pub struct Job {
    pub(crate) options: JobOptions,
    pub(crate) threads: usize,
    pub(crate) budget: Budget,
    pub(crate) frames: Frames,
    /// How rows find their destination; `None` partitioning by value (the ids are the
    /// values', [`ByValue`]).
    pub(crate) partitioning: Option<Partitioning>,
    /// The writers' destinations (partitioning by value: every value's buckets, for as many
    /// values as allowed).
    pub(crate) destinations: u32,
    pub(crate) writer: WriterOptions,
    /// Set when workers spill sorted runs.
    pub(crate) runs: Option<RunOptions>,
    /// Set when workers buffer the first destinations met and spill sorted runs past them.
    pub(crate) turn: Option<Turn>,
    /// What the output is, checked against the schema written.
    pub(crate) spec: OutputSpec,
    /// The schema written: the input's, or without the columns partitioned by value.
    pub(crate) out_schema: SchemaRef,
    /// Partitioning by value, when asked.
    pub(crate) by_value: Option<ByValue>,
    /// The input, when it is a stream of batches rather than files.
    pub(crate) stream: Option<StreamInput>,
    pub(crate) started: Instant,
}

impl Job {
    /// Checks `options` and the inputs they name: the partition count, the output directory,
    /// format, compression and layout together, the memory limit, the input files (found,
    /// readable, of one schema, cut into frames), the key columns (present, of types the
    /// scheme can hash), and for range partitioning the split points, sampled now.
    /// Partitioning by value into Parquet files, the values of the input's first rows are
    /// counted too (its first 64Ki rows, read again by the run): when their files' writers
    /// fit, the files are written as flushed whatever `max_partitions` allows.
    ///
    /// # Errors
    /// [`JobError::InvalidOption`] naming what cannot work; [`JobError::OutputNotEmpty`];
    /// [`JobError::Input`] for inputs that cannot be read; [`JobError::Write`] for a
    /// partitioning or output format that does not fit the inputs' schema.
    pub fn try_new(options: JobOptions) -> Result<Self> {
        Self::checked(options, None)
    }

    /// As [`try_new`](Self::try_new), for a job whose input is the stream of batches
    /// `reader` instead of files (`options.inputs` empty): workers read its batches in turn,
    /// each partitioning the batch it took. Range partitioning, which samples its input
    /// before the run, takes files only.
    ///
    /// # Errors
    /// As [`try_new`](Self::try_new); [`JobError::InvalidOption`] for input files named too,
    /// or range partitioning. A batch of another schema than the stream's fails the run.
    pub fn from_stream(
        options: JobOptions,
        reader: Box<dyn arrow_array::RecordBatchReader + Send>,
    ) -> Result<Self> {
        Self::checked(options, Some(reader))
    }

    fn checked(
        options: JobOptions,
        stream: Option<Box<dyn arrow_array::RecordBatchReader + Send>>,
    ) -> Result<Self> {
        let started = Instant::now();
        partout_core::plan::check_partition_count(options.partitions)
            .map_err(|e| JobError::InvalidOption(e.to_string()))?;
        let by_value = !options.partition_by.is_empty();
        // The writer's destinations: every value's buckets, for as many values as allowed.
        let destinations = match by_value {
            false => options.partitions,
            true => by_value::check(&options)?,
        };
        // The storage options are for whatever of the inputs and output is in a store.
        let location = match options.output.to_str() {
            Some(text) if partout_input::is_store_url(text) || !stores_in(&options.inputs) => {
                Location::parse(text, &options.storage_options)?
            }
            Some(text) => Location::parse(text, &Default::default())?,
            None => Location::local(&options.output),
        };
        let existing = location.place().check(options.mode)?;
        let threads = match options.threads {
            Some(0) => {
                return Err(JobError::InvalidOption(
                    "a job needs at least one thread".into(),
                ));
            }
            Some(threads) => threads,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let spec = OutputSpec::try_new(
            options.format,
            options.compression,
            options.layout,
            location,
        )?
        .with_parquet_settings(options.parquet.clone())?
        .with_rollover(options.rollover)?
        .with_sort_order(options.sort_by.clone())?
        .with_file_names(options.file_name.clone())?;
        // Two files of one name: refused before anything is written. A Hive directory holds
        // a value's buckets; an object store's objects are never replaced in place.
        if let Some(pattern) = spec.file_names() {
            let in_store = spec.location().place().local_path().is_none();
            pattern.check(
                options.partitions,
                options.rollover.is_set(),
                options.mode.adds() || in_store,
            )?;
        }
        // A run added to the output there is checked against it before anything is written.
        let run = RunShape {
            format: spec.format(),
            compression: spec.compression(),
            layout: spec.layout(),
            scheme: options.scheme,
            keys: &options.keys,
            partition_by: &options.partition_by,
            partitions: options.partitions,
            sort_by: &options.sort_by,
        };
        check_compatible(existing.as_ref(), &run, options.mode)?;
        let table_bytes = by_value::table_bytes(&options)?;
        // Each worker reading from a store holds windows of the objects it reads.
        let read_bytes = match stores_in(&options.inputs) {
            true => threads as u64 * partout_input::STORE_READ_BYTES,
            false => 0,
        };
        let shared = options
            .memory_limit
            .checked_sub(table_bytes + read_bytes)
            .filter(|&left| left > 0)
            .ok_or_else(|| {
                JobError::InvalidOption(format!(
                    "a memory limit of {} bytes leaves nothing once {read_bytes} bytes are set \
                     aside for reading {threads} worker(s)' inputs from a store",
                    options.memory_limit
                ))
            })?;
        let budget = match by_value {
            false => Budget::try_new,
            true => Budget::try_discovered,
        }(shared, destinations, threads, spec.is_staged(by_value))?;

        // Frames: about sixteen per worker, of 64K rows at least: the workers' last frames
        // end within a small frame of each other, and frames do not shrink to nothing.
        let (frames, mut stream) = match stream {
            None => {
                let storage = match stores_in(&options.inputs) {
                    true => options.storage_options.clone(),
                    false => Default::default(),
                };
                let files = discover_in(&options.inputs, &storage)?;
                let files = inputs_outside(files, &options.output)?;
                let frames = plan_frames_by(&files, |rows| {
                    rows.map_or(1 << 20, |rows| {
                        (rows as usize / (threads * 16)).max(64 << 10)
                    })
                })?;
                (frames, None)
            }
            Some(reader) => {
                if !options.inputs.is_empty() {
                    return Err(JobError::InvalidOption(
                        "a job reads either input files or a stream of batches, not both".into(),
                    ));
                }
                if options.scheme == Scheme::Range {
                    return Err(JobError::InvalidOption(
                        "range partitioning samples its input files before the run: a stream \
                         of batches takes hash, spark or round-robin"
                            .into(),
                    ));
                }
                let frames = Frames {
                    schema: reader.schema(),
                    frames: Vec::new(),
                };
                (frames, Some(StreamInput::new(reader)))
            }
        };
        // The key columns and the output format checked before anything is written.
        let context = || match options.keys.is_empty() {
            true => format!("partitioning by {}", options.scheme),
            false => format!("partitioning by {}", options.keys.join(",")),
        };
        let (partitioning, by_value, out_schema) = match by_value {
            false => (
                Some(partitioning(&options, &frames, context())?),
                None,
                frames.schema.clone(),
            ),
            true => {
                let (by_value, out_schema) = ByValue::try_new(&options, &frames, table_bytes)?;
                (None, Some(by_value), out_schema)
            }
        };
        // The Parquet settings name columns of the files (a Hive layout's leave its partition
        // columns out): an option to refuse now, not a file that fails to be written.
        spec.parquet_settings().check_schema(&out_schema)?;
        spec.sort_order().check_schema(&out_schema)?;
        // Parquet files whose writers fit beside the workers' buffers (partitioning by value:
        // those of the first values met): each file written as it is flushed, not staged.
        // High limits of values are charged as met: what the first rows hold tells whether
        // their values' writers fit.
        // Sorted files are written whole, from every row staged.
        let direct = match spec.format() {
            partout_format::Format::Parquet
                if spec.is_staged(by_value.is_some()) && spec.sort_order().is_empty() =>
            {
                let discovered = by_value.as_ref().map(|by_value| Discovered {
                    sampled: by_value.sampled(&frames.schema, &first_rows(&frames, &mut stream)),
                });
                Budget::flushed_parquet(
                    shared,
                    destinations,
                    threads,
                    partout_output::FlushedParquet::writer_bytes(&out_schema),
                    discovered,
                )
            }
            _ => None,
        };
        let budget = direct.unwrap_or(budget);
        let (writer, runs) = writer_options(&budget, stream.is_some());
        // Workers that buffer the first destinations met turn to sorted runs past them.
        // Once turned, a worker's buffers and what the destinations not met cost them are
        // gone: it holds batches within the share of a job that spills sorted runs from the
        // start.
        // Parquet files written as flushed keep their writers open past the turn.
        let turn = match budget.sorted_runs_past {
            0 => None,
            past => {
                let sorted = Budget::try_new(shared, destinations, threads, spec.is_staged(true))?;
                let writers = budget.parquet_writers_open / threads as u64;
                let sorted = Budget {
                    sorted_runs: true,
                    per_worker_buffers: sorted
                        .per_worker_buffers
                        .saturating_sub(writers)
                        .max(budget.per_worker_buffers),
                    ..sorted
                };
                let (writer, runs) = writer_options(&sorted, stream.is_some());
                Some(Turn {
                    past: past as usize,
                    writer,
                    runs: runs.expect("sorted runs' options"),
                })
            }
        };
        match &partitioning {
            Some(partitioning) => PartitionedWriter::check(&out_schema, partitioning, &writer),
            None => PartitionedWriter::check_given_ids(&out_schema, &writer),
        }
        .map_err(writing(context()))?;
        spec.check_schema(&out_schema).map_err(writing(context()))?;
        Ok(Self {
            options,
            threads,
            budget,
            frames,
            partitioning,
            destinations,
            writer,
            runs,
            turn,
            spec,
            out_schema,
            by_value,
            stream,
            started,
        })
    }

    /// The options.
    pub fn options(&self) -> &JobOptions {
        &self.options
    }

    /// Worker threads the run uses.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How the memory limit is shared.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Bytes of the memory limit set aside for the table of distinct values (partitioning
    /// by value; 0 otherwise), besides the [`budget`](Self::budget)'s shares.
    pub fn value_table_bytes(&self) -> u64 {
        self.by_value.as_ref().map_or(0, |b| b.table_bytes)
    }

    /// The inputs' rows, where their metadata tells it (not for CSV files, IPC streams or a
    /// stream of batches).
    pub fn input_rows(&self) -> Option<u64> {
        match self.stream {
            Some(_) => None,
            None => self.frames.rows(),
        }
    }

    /// The partitioning (for range partitioning, with its sampled split points); `None`
    /// partitioning by value, where each row's destination is its value's.
    pub fn partitioning(&self) -> Option<&Partitioning> {
        self.partitioning.as_ref()
    }

    /// The output's spec: format, compression, layout and location.
    pub fn output(&self) -> &OutputSpec {
        &self.spec
    }
}

/// Rows the job reads ahead to see what values the input holds (as many as the direct
/// writers sample for their dictionaries): the first frame's, or the input stream's first
/// batch, given back to the stream.
const FIRST_ROWS: usize = 1 << 16;

/// The input's first rows, for [`ByValue::sampled`]: up to [`FIRST_ROWS`] of the first
/// frame, or the stream's first batch (read ahead and given back first). None when they
/// cannot be read: the run says why.
fn first_rows(frames: &Frames, stream: &mut Option<StreamInput>) -> Vec<arrow_array::RecordBatch> {
    if let Some(stream) = stream {
        return stream.peek().into_iter().collect();
    }
    let Some(Ok(reader)) = frames.frames.first().map(|f| f.read(&frames.schema)) else {
        return Vec::new();
    };
    let mut rows = 0;
    reader
        .map_while(Result::ok)
        .take_while(|batch| {
            let more = rows < FIRST_ROWS;
            rows += batch.num_rows();
            more
        })
        .collect()
}

/// The input files but those under the output directory (an earlier run's output, when the
/// output directory lies in an input directory: it is about to be replaced, and reading it
/// would duplicate rows).
fn inputs_outside(files: Vec<InputFile>, out: &Path) -> Result<Vec<InputFile>> {
    let inside: Box<dyn Fn(&InputFile) -> bool> = match out.to_str() {
        // An object under the output's prefix.
        Some(url) if partout_input::is_store_url(url) => {
            let prefix = format!("{}/", url.trim_end_matches('/'));
            Box::new(move |f| {
                f.in_store() && f.path.to_str().is_some_and(|p| p.starts_with(&prefix))
            })
        }
        _ => match out.canonicalize() {
            Ok(out) => Box::new(move |f| {
                !f.in_store() && f.path.canonicalize().is_ok_and(|p| p.starts_with(&out))
            }),
            Err(_) => return Ok(files),
        },
    };
    let kept: Vec<_> = files.into_iter().filter(|f| !inside(f)).collect();
    if kept.is_empty() {
        return Err(JobError::InvalidOption(format!(
            "every input file is inside the output directory {}",
            out.display()
        )));
    }
    Ok(kept)
}

/// Whether any of `inputs` is a URL of an object store.
fn stores_in(inputs: &[std::path::PathBuf]) -> bool {
    inputs
        .iter()
        .any(|i| i.to_str().is_some_and(partout_input::is_store_url))
}

/// The workers' writer options under `budget` (reading a `stream` of another library's
/// batches or files), and how they spill sorted runs when the budget says so.
fn writer_options(budget: &Budget, stream: bool) -> (WriterOptions, Option<RunOptions>) {
    let per_worker = budget.per_worker_buffers as usize;
    let target = WriterOptions::default().target_bytes.min(per_worker);
    // Workers spilling sorted runs hold whole batches. A stream's batches are another
    // library's memory, whose buffers can be twice the bytes their arrays show (builders
    // grow by doubling; the C data interface tells lengths, not capacities): such workers
    // hold half as many.
    let held = match (stream, budget.sorted_runs) {
        (true, true) => per_worker / 2,
        _ => per_worker,
    };
    let mut writer = WriterOptions::default()
        .with_memory_limit(held)
        .with_target_bytes(target);
    let runs = budget.sorted_runs.then(|| RunOptions::within(per_worker));
    if runs.is_some() {
        writer = writer.with_flush(Flush::AllAtLimit);
    }
    (writer, runs)
}
