//! [`Manifest`]: what a repartition run wrote, as `_manifest.json` beside its outputs: its
//! output's spec as is ([`Format`], [`Compression`] and [`Layout`], by the names the
//! workspace's one vocabulary gives them; [`Manifest::output_spec`] reads it back), and the
//! memory limit's shares, [`Budget`].
//!
//! A public module of its own: the output [`Format`] is not [`crate::Format`], the format of
//! an input file. The job that writes a manifest, and how it shares its memory limit, are
//! partout-job's.

pub use crate::{ColumnStatistics, DestinationFile, FileList, FileNamePattern, Layout, SortOrder};
use partout_core::ids::Scheme;
pub use partout_format::{Compression, Format, ZstdLevel};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// The manifest's file name in the output directory.
pub const MANIFEST_FILE: &str = "_manifest.json";

/// What a run wrote: its options, row and byte counts, memory, timings, and each
/// destination's output. Serialized as `_manifest.json` in the output directory;
/// [`Manifest::read`] reads it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// How rows found their destination.
    pub scheme: Scheme,
    /// The key columns.
    pub keys: Vec<String>,
    /// The columns partitioned by value (a directory per distinct value; none: left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_by: Vec<String>,
    /// Destinations.
    pub partitions: u32,
    /// What each destination's output holds.
    pub format: Format,
    /// Their compression.
    pub compression: Compression,
    /// Files per destination, or shuffle files per worker.
    pub layout: Layout,
    /// The order of rows within each file (none: left out, rows as they came).
    #[serde(default, skip_serializing_if = "SortOrder::is_empty")]
    pub sort_by: SortOrder,
    /// The pattern the files were named after (none: left out, partout's own names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<FileNamePattern>,
    /// The most rows a file holds, when files roll over at a row count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rows_per_file: Option<u64>,
    /// About the most bytes a file holds, when files roll over at a size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes_per_file: Option<u64>,
    /// The Parquet writer's settings the user chose, as `--parquet-option` takes them (none:
    /// left out, partout's own).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub parquet_options: std::collections::BTreeMap<String, String>,
    /// Worker threads.
    pub threads: usize,
    /// Rows read.
    pub input_rows: u64,
    /// Bytes of Arrow data partitioned (in memory, as read).
    pub input_arrow_bytes: u64,
    /// Rows written (every row once).
    pub output_rows: u64,
    /// Bytes written, all destinations together (the manifest aside).
    pub output_bytes: u64,
    /// Flushes of destination buffers.
    pub flushes: u64,
    /// Flushes forced by the memory limit.
    pub memory_flushes: u64,
    /// The memory limit, in bytes.
    pub memory_limit: u64,
    /// How the memory limit was shared.
    pub memory_budget: Budget,
    /// The process's peak resident memory, where the system tells it (Linux).
    pub peak_rss_bytes: Option<u64>,
    /// Each worker's timings.
    pub workers: Vec<WorkerTimings>,
    /// Seconds spent ending the destination files (files layout; for Parquet, writing the
    /// files from the staged rows).
    pub files_finish_seconds: f64,
    /// How large the Parquet files' row groups came out (Parquet files; each destination's
    /// are in its entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_groups: Option<RowGroupSizes>,
    /// Each destination's rows and bytes, and its file (files layout).
    pub destinations: Vec<DestinationEntry>,
    /// Range partitioning's split points, each as its key values' text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_bounds: Option<Vec<Vec<String>>>,
    /// Each worker's data and index file (shuffle layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_files: Option<Vec<ShuffleFiles>>,
}

/// One worker's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerTimings {
    /// The worker's index.
    pub worker: usize,
    /// From its start to its writer's end.
    pub seconds: f64,
    /// Computing partition ids.
    pub ids_seconds: f64,
    /// Moving rows into destination buffers.
    pub scatter_seconds: f64,
    /// Encoding and writing flushes.
    pub output_seconds: f64,
    /// Partitioning by value: the rows the worker had taken when it turned from buffering to
    /// sorted runs, more values being met than its buffers were planned for (absent: it
    /// never turned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sorted_runs_from_row: Option<u64>,
}

/// One destination's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DestinationEntry {
    /// The destination.
    pub destination: u32,
    /// Rows it received.
    pub rows: u64,
    /// Bytes it received.
    pub bytes: u64,
    /// Its files, in order (files layout): one, several when files roll over at a size, none
    /// for Presto pages of no rows. Absent in the shuffle layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FileList>,
}

impl DestinationEntry {
    /// The directory its files are in (partitioning by value, its value's: `year=2024`,
    /// `a=1/b=x`); `None` for files at the top of the output.
    pub fn directory(&self) -> Option<&str> {
        let name = &self.files.as_deref()?.first()?.name;
        name.rsplit_once('/').map(|(dir, _)| dir)
    }

    /// Its one file: `None` when it has none, or several.
    pub fn only_file(&self) -> Option<&DestinationFile> {
        match self.files.as_deref() {
            Some([file]) => Some(file),
            _ => None,
        }
    }
}

/// The row groups of a run's Parquet files, all files together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowGroupSizes {
    /// Row groups in all.
    pub count: u64,
    /// Rows of the smallest.
    pub min_rows: u64,
    /// Rows of the largest.
    pub max_rows: u64,
    /// Rows per row group on average.
    pub mean_rows: f64,
}

impl RowGroupSizes {
    /// The sizes of row groups of `rows` rows each; `None` when there are none.
    pub fn of(rows: impl IntoIterator<Item = u64>) -> Option<Self> {
        let (mut count, mut min_rows, mut max_rows, mut sum) = (0u64, u64::MAX, 0u64, 0u64);
        for r in rows {
            count += 1;
            min_rows = min_rows.min(r);
            max_rows = max_rows.max(r);
            sum += r;
        }
        (count > 0).then(|| Self {
            count,
            min_rows,
            max_rows,
            mean_rows: sum as f64 / count as f64,
        })
    }

    /// The sizes of the row groups of every file of `destinations`.
    pub fn of_files(destinations: &[DestinationEntry]) -> Option<Self> {
        Self::of(
            destinations
                .iter()
                .flat_map(|d| d.files.iter().flatten())
                .flat_map(|f| f.row_groups.iter().flatten().copied()),
        )
    }
}

/// One worker's shuffle files, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleFiles {
    /// The data file.
    pub data: String,
    /// The index of byte ranges.
    pub index: String,
}

/// How a job's memory limit is shared (recorded in the manifest as `memory_budget`).
/// partout-job works the shares out (its `BudgetExt::try_new`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// What destinations cost whatever their rows.
    pub destinations_fixed: u64,
    /// Open Parquet row groups, all writing threads together, once the rows are staged (zero
    /// for other outputs).
    pub parquet_row_groups: u64,
    /// Each worker's buffered rows.
    pub per_worker_buffers: u64,
    /// Whether workers hold whole batches and spill them as sorted runs (when each
    /// destination's share of a worker's buffers would be under 32 KiB).
    #[serde(default)]
    pub sorted_runs: bool,
    /// Parquet writers open while the workers run, all together: files written as they are
    /// flushed, not staged first (zero, and left out of the JSON: every row staged).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parquet_writers_open: u64,
    /// Partitioning by value: how many destinations the workers buffer before they turn to
    /// sorted runs, when more values are allowed than their buffers could give a useful share
    /// each (zero, and left out of the JSON: they never turn).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sorted_runs_past: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A manifest that could not be read or written: what was being done, naming the file, and
/// the system's error (given through [`source`](std::error::Error::source); a manifest that
/// is not JSON of a manifest gives serde_json's error, wrapped as an [`std::io::Error`]).
#[derive(Debug)]
pub struct ManifestError {
    /// What was being done, naming the file (`reading …/_manifest.json`).
    pub context: String,
    /// The system's error.
    pub source: std::io::Error,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.context)
    }
}

impl std::error::Error for ManifestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// `context` for a file system error.
fn failed(context: String) -> impl FnOnce(std::io::Error) -> ManifestError {
    move |source| ManifestError { context, source }
}

impl Manifest {
    /// Reads `_manifest.json` of the output directory `dir`.
    ///
    /// # Errors
    /// [`ManifestError`] when it cannot be read or is not a manifest.
    pub fn read(dir: &Path) -> Result<Self, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let context = || format!("reading {}", path.display());
        let text = std::fs::read(&path).map_err(failed(context()))?;
        Self::parse(&text, &path)
    }

    /// The manifest `bytes` hold, read from `path` (named in errors).
    ///
    /// # Errors
    /// [`ManifestError`] when they are not a manifest.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self, ManifestError> {
        serde_json::from_slice(bytes)
            .map_err(|e| failed(format!("reading {}", path.display()))(std::io::Error::other(e)))
    }

    /// Writes it as `_manifest.json` into the directory `dir`.
    ///
    /// # Errors
    /// [`ManifestError`] when it cannot be written.
    pub fn write(&self, dir: &Path) -> Result<(), ManifestError> {
        use std::io::Write;
        let path = dir.join(MANIFEST_FILE);
        // Streamed: at 100,000 destinations the text is 20 MB.
        std::fs::File::create(&path)
            .map(std::io::BufWriter::new)
            .and_then(|mut out| {
                serde_json::to_writer_pretty(&mut out, self).map_err(std::io::Error::other)?;
                out.flush()
            })
            .map_err(failed(format!("writing {}", path.display())))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for scheme in [
            Scheme::Hash,
            Scheme::Spark,
            Scheme::RoundRobin,
            Scheme::Range,
        ] {
            assert_eq!(scheme.to_string().parse::<Scheme>().unwrap(), scheme);
            let json = serde_json::to_string(&scheme).unwrap();
            assert_eq!(serde_json::from_str::<Scheme>(&json).unwrap(), scheme);
        }
        // Manifests name the schemes in lower case, as they always have.
        assert_eq!(
            serde_json::to_string(&Scheme::RoundRobin).unwrap(),
            "\"roundrobin\""
        );
        for format in [Format::Parquet, Format::Ipc, Format::Presto] {
            assert_eq!(format.to_string().parse::<Format>().unwrap(), format);
        }
        for c in [
            Compression::None,
            Compression::Snappy,
            Compression::Lz4,
            Compression::ZSTD,
            Compression::Zstd(ZstdLevel::try_new(1).unwrap()),
            Compression::Zstd(ZstdLevel::try_new(-50).unwrap()),
        ] {
            assert_eq!(c.to_string().parse::<Compression>().unwrap(), c);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<Compression>(&json).unwrap(), c);
        }
        assert_eq!(
            serde_json::to_string(&Compression::ZSTD).unwrap(),
            "\"zstd\""
        );
        let one = Compression::Zstd(ZstdLevel::try_new(1).unwrap());
        assert_eq!(serde_json::to_string(&one).unwrap(), "\"zstd:1\"");
        let err = serde_json::from_str::<Compression>("\"zstd:99\"").unwrap_err();
        assert!(err.to_string().contains("ZSTD level 99"), "{err}");
        for layout in [Layout::Files, Layout::Shuffle] {
            assert_eq!(layout.to_string().parse::<Layout>(), Ok(layout));
        }
        let err = "gzip".parse::<Compression>().unwrap_err().to_string();
        assert!(err.contains("gzip") && err.contains("snappy"), "{err}");
    }

    /// A manifest of Presto pages, files layout; `json`, its JSON (serde_json's compact).
    pub(crate) fn presto_files() -> (Manifest, &'static str) {
        let manifest = Manifest {
            scheme: Scheme::RoundRobin,
            keys: Vec::new(),
            partition_by: Vec::new(),
            partitions: 2,
            format: Format::Presto,
            compression: Compression::Lz4,
            layout: Layout::Files,
            sort_by: SortOrder::default(),
            file_name: None,
            max_rows_per_file: None,
            max_bytes_per_file: None,
            parquet_options: Default::default(),
            threads: 1,
            input_rows: 10,
            input_arrow_bytes: 80,
            output_rows: 10,
            output_bytes: 64,
            flushes: 3,
            memory_flushes: 1,
            memory_limit: 256 << 20,
            memory_budget: Budget {
                parquet_writers_open: 0,
                sorted_runs_past: 0,
                destinations_fixed: 4096,
                parquet_row_groups: 0,
                per_worker_buffers: 1024,
                sorted_runs: false,
            },
            peak_rss_bytes: None,
            workers: vec![WorkerTimings {
                worker: 0,
                seconds: 0.5,
                ids_seconds: 0.25,
                scatter_seconds: 0.125,
                output_seconds: 0.0,
                sorted_runs_from_row: None,
            }],
            files_finish_seconds: 0.0,
            row_groups: None,
            destinations: vec![
                DestinationEntry {
                    destination: 0,
                    rows: 10,
                    bytes: 64,
                    files: Some(smallvec::smallvec![DestinationFile {
                        name: "part-00000.presto".into(),
                        rows: 10,
                        bytes: 64,
                        row_groups: None,
                        columns: None,
                    }]),
                },
                DestinationEntry {
                    destination: 1,
                    rows: 0,
                    bytes: 0,
                    files: Some(FileList::new()),
                },
            ],
            range_bounds: None,
            shuffle_files: None,
        };
        let json = concat!(
            r#"{"scheme":"roundrobin","keys":[],"partitions":2,"format":"presto","#,
            r#""compression":"lz4","layout":"files","threads":1,"input_rows":10,"#,
            r#""input_arrow_bytes":80,"output_rows":10,"output_bytes":64,"flushes":3,"#,
            r#""memory_flushes":1,"memory_limit":268435456,"memory_budget":"#,
            r#"{"destinations_fixed":4096,"parquet_row_groups":0,"per_worker_buffers":1024,"#,
            r#""sorted_runs":false},"peak_rss_bytes":null,"workers":[{"worker":0,"#,
            r#""seconds":0.5,"ids_seconds":0.25,"scatter_seconds":0.125,"output_seconds":0.0}],"#,
            r#""files_finish_seconds":0.0,"destinations":[{"destination":0,"rows":10,"#,
            r#""bytes":64,"files":[{"name":"part-00000.presto","rows":10,"bytes":64}]},"#,
            r#"{"destination":1,"rows":0,"bytes":0,"files":[]}]}"#,
        );
        (manifest, json)
    }

    #[test]
    fn the_json_keeps_its_names_and_leaves_out_what_a_layout_lacks() {
        let (files, json) = presto_files();
        assert_eq!(serde_json::to_string(&files).unwrap(), json);
        assert_eq!(serde_json::from_str::<Manifest>(json).unwrap(), files);

        // Parquet files: row groups, each file's and all together; a destination's files
        // rolled over.
        let mut parquet = files.clone();
        parquet.scheme = Scheme::Spark;
        parquet.keys = vec!["k".into()];
        parquet.format = Format::Parquet;
        parquet.compression = Compression::Snappy;
        parquet.destinations.truncate(1);
        let file = |name: &str, rows: u64| DestinationFile {
            name: name.into(),
            rows,
            bytes: 32,
            row_groups: Some(vec![rows]),
            columns: None,
        };
        parquet.destinations[0].files = Some(smallvec::smallvec![
            file("bucket-00000-00000.parquet", 6),
            file("bucket-00000-00001.parquet", 4),
        ]);
        parquet.row_groups = RowGroupSizes::of([6, 4]);
        let json = serde_json::to_string(&parquet).unwrap();
        let expected = concat!(
            r#""files_finish_seconds":0.0,"row_groups":{"count":2,"min_rows":4,"max_rows":6,"#,
            r#""mean_rows":5.0},"destinations":[{"destination":0,"rows":10,"bytes":64,"#,
            r#""files":[{"name":"bucket-00000-00000.parquet","rows":6,"bytes":32,"#,
            r#""row_groups":[6]},{"name":"bucket-00000-00001.parquet","rows":4,"bytes":32,"#,
            r#""row_groups":[4]}]}]}"#,
        );
        assert!(json.ends_with(expected), "{json}");
        assert!(
            json.starts_with(r#"{"scheme":"spark","keys":["k"],"#),
            "{json}"
        );
        assert!(json.contains(r#""format":"parquet","compression":"snappy","#));
        assert_eq!(serde_json::from_str::<Manifest>(&json).unwrap(), parquet);

        // The shuffle layout: no file per destination, each worker's files; range bounds.
        let mut shuffle = files;
        shuffle.scheme = Scheme::Range;
        shuffle.format = Format::Ipc;
        shuffle.layout = Layout::Shuffle;
        shuffle.memory_budget.sorted_runs = true;
        shuffle.destinations.truncate(1);
        shuffle.destinations[0].files = None;
        shuffle.range_bounds = Some(vec![vec!["5".into()]]);
        shuffle.shuffle_files = Some(vec![ShuffleFiles {
            data: "shuffle-000.data".into(),
            index: "shuffle-000.index".into(),
        }]);
        let json = serde_json::to_string(&shuffle).unwrap();
        let expected = concat!(
            r#""destinations":[{"destination":0,"rows":10,"bytes":64}],"#,
            r#""range_bounds":[["5"]],"shuffle_files":[{"data":"shuffle-000.data","#,
            r#""index":"shuffle-000.index"}]}"#,
        );
        assert!(json.ends_with(expected), "{json}");
        assert!(json.contains(r#""layout":"shuffle","#), "{json}");
        assert!(json.contains(r#""sorted_runs":true}"#), "{json}");
        assert_eq!(serde_json::from_str::<Manifest>(&json).unwrap(), shuffle);
    }

    #[test]
    fn a_manifest_reads_back_and_a_missing_one_names_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Manifest::read(dir.path()).unwrap_err();
        let path = dir.path().join(MANIFEST_FILE);
        assert_eq!(missing.to_string(), format!("reading {}", path.display()));
        assert_eq!(missing.source.kind(), std::io::ErrorKind::NotFound);

        let (manifest, _) = presto_files();
        manifest.write(dir.path()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, serde_json::to_string_pretty(&manifest).unwrap());
        assert_eq!(Manifest::read(dir.path()).unwrap(), manifest);

        std::fs::write(&path, "{}").unwrap();
        let not_one = Manifest::read(dir.path()).unwrap_err();
        assert_eq!(not_one.to_string(), format!("reading {}", path.display()));
        assert!(not_one.source.get_ref().is_some(), "{not_one:?}");
    }

    #[test]
    fn the_spec_recorded_is_the_spec_read_back() {
        use crate::{Location, OutputSpec};
        let at = || Location::local("out");
        let (mut manifest, _) = presto_files();
        let specs = [
            OutputSpec::parse("presto", Some("lz4"), "files", at()).unwrap(),
            OutputSpec::parse("ipc", Some("zstd:-3"), "shuffle", at()).unwrap(),
            OutputSpec::parse("parquet", None, "files", at()).unwrap(),
        ];
        for spec in specs {
            manifest.format = spec.format();
            manifest.compression = spec.compression();
            manifest.layout = spec.layout();
            let json = serde_json::to_string(&manifest).unwrap();
            let read: Manifest = serde_json::from_str(&json).unwrap();
            assert_eq!(read.output_spec(at()).unwrap(), spec);
        }
        // A manifest recording what no run writes is refused, by what is wrong.
        manifest.format = Format::Parquet;
        manifest.layout = Layout::Shuffle;
        let err = manifest.output_spec(at()).unwrap_err().to_string();
        assert!(err.contains("shuffle layout writes ipc or presto"), "{err}");
    }
}
