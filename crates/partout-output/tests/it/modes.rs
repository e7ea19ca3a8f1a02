//! Write modes of a local output: `append` adds a run's files beside the old ones (named with
//! the run's id) and merges the manifests, `overwrite-partitions` replaces exactly the value
//! directories a run wrote, and a commit stopped at any of its steps leaves the old output as
//! it was, every file and the manifest, with nothing of the run left beside it.

use partout_core::ids::Scheme;
use partout_output::manifest::{
    Budget, Compression, DestinationEntry, DestinationFile, Format, Layout, Manifest,
};
use partout_output::{
    Commit, LocalDir, OutputError, Place, RunShape, SortOrder, WriteMode, check_compatible,
};
use std::collections::BTreeMap;
use std::path::Path;

/// A run's manifest: partitioning by `year` when `by_value`, else by hash of `k` into as
/// many destinations as `files`; each destination's files `(name, rows)`.
fn manifest(by_value: bool, files: &[&[(&str, u64)]]) -> Manifest {
    let destinations: Vec<DestinationEntry> = files
        .iter()
        .enumerate()
        .map(|(p, files)| DestinationEntry {
            destination: p as u32,
            rows: files.iter().map(|f| f.1).sum(),
            bytes: files.iter().map(|f| f.1 * 10).sum(),
            files: Some(
                files
                    .iter()
                    .map(|&(name, rows)| DestinationFile {
                        name: name.into(),
                        rows,
                        bytes: rows * 10,
                        row_groups: Some(vec![rows]),
                        columns: None,
                    })
                    .collect(),
            ),
        })
        .collect();
    Manifest {
        scheme: Scheme::Hash,
        keys: if by_value { vec![] } else { vec!["k".into()] },
        partition_by: if by_value {
            vec!["year".into()]
        } else {
            vec![]
        },
        partitions: destinations.len() as u32,
        format: Format::Parquet,
        compression: Compression::Snappy,
        sort_by: SortOrder::default(),
        file_name: None,
        max_rows_per_file: None,
        max_bytes_per_file: None,
        parquet_options: Default::default(),
        layout: Layout::Files,
        threads: 1,
        input_rows: destinations.iter().map(|d| d.rows).sum(),
        input_arrow_bytes: 0,
        output_rows: destinations.iter().map(|d| d.rows).sum(),
        output_bytes: destinations.iter().map(|d| d.bytes).sum(),
        flushes: 0,
        memory_flushes: 0,
        memory_limit: 1 << 28,
        memory_budget: Budget {
            destinations_fixed: 0,
            parquet_row_groups: 0,
            per_worker_buffers: 0,
            sorted_runs: false,
            parquet_writers_open: 0,
            sorted_runs_past: 0,
        },
        peak_rss_bytes: None,
        workers: vec![],
        files_finish_seconds: 0.0,
        row_groups: None,
        destinations,
        range_bounds: None,
        shuffle_files: None,
    }
}

/// Commits a run of `manifest` into `out` as `mode` says, its files written first (each
/// holding its own name); `stop_at`: the commit is told to stop at its k-th question.
fn commit(
    out: &Path,
    mode: WriteMode,
    manifest: Manifest,
    stop_at: Option<usize>,
) -> Result<Manifest, OutputError> {
    let place = LocalDir::new(out);
    place.check(mode)?;
    let pending = place.stage(mode)?;
    for file in manifest
        .destinations
        .iter()
        .flat_map(|d| d.files.iter().flatten())
    {
        let path = pending.dir().join(&file.name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &file.name).unwrap();
    }
    let asked = std::sync::atomic::AtomicUsize::new(0);
    let cancelled = || {
        let k = asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        stop_at.is_some_and(|stop| k >= stop)
    };
    pending.commit(
        manifest,
        &Commit {
            memory: 1 << 20,
            cancelled: &cancelled,
        },
    )
}

/// Every file under `dir` and what it holds.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let name = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string();
                found.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    found
}

/// Each destination's directory and its files' names, without the run ids: `(dir, [file])`.
fn listing(manifest: &Manifest) -> Vec<(String, Vec<String>)> {
    manifest
        .destinations
        .iter()
        .map(|d| {
            let files = d.files.iter().flatten();
            let names = files.map(|f| f.name.clone()).collect();
            (d.directory().unwrap_or_default().to_string(), names)
        })
        .collect()
}

/// The output there holds exactly the manifest and the files it lists, each holding what
/// its run wrote (the name it was written under).
fn assert_whole(out: &Path, manifest: &Manifest) {
    assert_eq!(&Manifest::read(out).unwrap(), manifest);
    let mut files = contents(out);
    files.remove("_manifest.json");
    let listed: Vec<&str> = manifest
        .destinations
        .iter()
        .flat_map(|d| d.files.iter().flatten().map(|f| f.name.as_str()))
        .collect();
    assert_eq!(
        files.keys().map(String::as_str).collect::<Vec<_>>().len(),
        listed.len()
    );
    for name in listed {
        let written = files
            .get(name)
            .unwrap_or_else(|| panic!("{name} is missing"));
        // Written under its name before the run's id was added.
        let untagged = String::from_utf8(written.clone()).unwrap();
        let stem = untagged.rsplit_once('.').unwrap().0;
        assert!(name.starts_with(stem), "{name} holds {untagged}");
    }
}

fn old_by_value() -> Manifest {
    manifest(
        true,
        &[
            &[("year=2023/part-00000.parquet", 5)],
            &[("year=2024/part-00000.parquet", 7)],
        ],
    )
}

fn run_by_value() -> Manifest {
    manifest(
        true,
        &[
            &[("year=2024/part-00000.parquet", 3)],
            &[
                ("year=2025/part-00000-00000.parquet", 4),
                ("year=2025/part-00000-00001.parquet", 1),
            ],
        ],
    )
}

#[test]
fn append_adds_the_run_s_files_beside_the_old_ones_and_merges_the_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    commit(&out, WriteMode::Error, old_by_value(), None).unwrap();
    let merged = commit(&out, WriteMode::Append, run_by_value(), None).unwrap();
    assert_whole(&out, &merged);
    let dirs: Vec<String> = listing(&merged).into_iter().map(|(d, _)| d).collect();
    assert_eq!(dirs, ["year=2023", "year=2024", "year=2025"]);
    let rows: Vec<u64> = merged.destinations.iter().map(|d| d.rows).collect();
    assert_eq!(rows, [5, 10, 5]);
    assert_eq!(merged.output_rows, 20);
    assert_eq!(merged.partitions, 3);
    // The old files as they were; the run's named with its id, after them.
    let files = listing(&merged);
    assert_eq!(files[0].1, ["year=2023/part-00000.parquet"]);
    assert_eq!(files[1].1[0], "year=2024/part-00000.parquet");
    let run = files[1].1[1]
        .strip_prefix("year=2024/part-00000-")
        .and_then(|n| n.strip_suffix(".parquet"))
        .unwrap();
    assert!(
        !run.is_empty() && run.chars().all(|c| c.is_ascii_hexdigit()),
        "{run}"
    );
    assert_eq!(
        files[2].1,
        [
            format!("year=2025/part-00000-00000-{run}.parquet"),
            format!("year=2025/part-00000-00001-{run}.parquet")
        ]
    );
    // Appending again adds again.
    let again = commit(&out, WriteMode::Append, run_by_value(), None).unwrap();
    assert_whole(&out, &again);
    assert_eq!(again.output_rows, 28);
    assert_eq!(listing(&again)[2].1.len(), 4);
}

#[test]
fn overwrite_partitions_replaces_exactly_the_value_directories_the_run_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    commit(&out, WriteMode::Error, old_by_value(), None).unwrap();
    let kept = std::fs::read(out.join("year=2023/part-00000.parquet")).unwrap();
    let merged = commit(&out, WriteMode::OverwritePartitions, run_by_value(), None).unwrap();
    assert_whole(&out, &merged);
    let files = listing(&merged);
    assert_eq!(files.len(), 3);
    assert_eq!(files[0].1, ["year=2023/part-00000.parquet"]);
    assert_eq!(std::fs::read(out.join(&files[0].1[0])).unwrap(), kept);
    // 2024's old file is gone; only the run's is there.
    assert_eq!(files[1].1.len(), 1);
    assert_ne!(files[1].1[0], "year=2024/part-00000.parquet");
    assert!(!out.join("year=2024/part-00000.parquet").exists());
    let rows: Vec<u64> = merged.destinations.iter().map(|d| d.rows).collect();
    assert_eq!(rows, [5, 3, 5]);
}

#[test]
fn appending_by_hash_adds_each_destination_s_files_after_its_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let old = manifest(
        false,
        &[&[("part-00000.parquet", 2)], &[("part-00001.parquet", 3)]],
    );
    commit(&out, WriteMode::Error, old.clone(), None).unwrap();
    let merged = commit(&out, WriteMode::Append, old, None).unwrap();
    assert_whole(&out, &merged);
    let files = listing(&merged);
    assert_eq!(files[0].1.len(), 2);
    assert_eq!(files[1].1[0], "part-00001.parquet");
    assert_eq!(merged.output_rows, 10);
}

#[test]
fn a_commit_stopped_at_any_step_leaves_the_old_output_as_it_was() {
    for mode in [
        WriteMode::Append,
        WriteMode::OverwritePartitions,
        WriteMode::Overwrite,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        commit(&out, WriteMode::Error, old_by_value(), None).unwrap();
        let before = contents(&out);
        let mut stop = 0;
        loop {
            match commit(&out, mode, run_by_value(), Some(stop)) {
                Err(OutputError::Cancelled) => {
                    assert_eq!(contents(&out), before, "{mode}: stopped at question {stop}");
                    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
                    assert_eq!(left.len(), 1, "{mode}: the run's staging is left");
                    stop += 1;
                }
                Ok(committed) => {
                    assert!(stop >= 2, "{mode}: committed before its steps were asked");
                    assert_whole(&out, &committed);
                    break;
                }
                Err(e) => panic!("{mode}: {e}"),
            }
        }
    }
}

#[test]
fn runs_unlike_the_output_there_are_refused_before_anything_is_written() {
    let old = old_by_value();
    let shape = RunShape::of(&old);
    check_compatible(Some(&old), &shape, WriteMode::Append).unwrap();
    let ipc = RunShape {
        format: Format::Ipc,
        ..shape
    };
    let err = check_compatible(Some(&old), &ipc, WriteMode::Append).unwrap_err();
    assert!(
        err.to_string()
            .contains("its format is parquet, this run's ipc"),
        "{err}"
    );
    let other = ["month".to_string()];
    let by_month = RunShape {
        partition_by: &other,
        ..shape
    };
    let err = check_compatible(Some(&old), &by_month, WriteMode::Append).unwrap_err();
    assert!(err.to_string().contains("partitioning by value"), "{err}");
    let order: SortOrder = "k DESC".parse().unwrap();
    let sorted = RunShape {
        sort_by: &order,
        ..shape
    };
    let err = check_compatible(Some(&old), &sorted, WriteMode::OverwritePartitions).unwrap_err();
    assert!(
        err.to_string()
            .contains("order within files is none, this run's k DESC NULLS LAST"),
        "{err}"
    );
    let hash = manifest(
        false,
        &[&[("part-00000.parquet", 2)], &[("part-00001.parquet", 3)]],
    );
    let three = RunShape {
        partitions: 3,
        ..RunShape::of(&hash)
    };
    let err = check_compatible(Some(&hash), &three, WriteMode::Append).unwrap_err();
    assert!(
        err.to_string()
            .contains("destination count is 2, this run's 3"),
        "{err}"
    );
    let err =
        check_compatible(None, &RunShape::of(&hash), WriteMode::OverwritePartitions).unwrap_err();
    assert!(
        err.to_string().contains("takes partitioning by value"),
        "{err}"
    );

    // Files without a manifest are not an output to add to.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.csv"), "x").unwrap();
    let err = LocalDir::new(dir.path())
        .check(WriteMode::Append)
        .unwrap_err();
    assert!(err.to_string().contains("no _manifest.json"), "{err}");
    // Nothing there: appending is writing.
    let empty = dir.path().join("nothing");
    assert!(
        LocalDir::new(&empty)
            .check(WriteMode::Append)
            .unwrap()
            .is_none()
    );
    let first = commit(&empty, WriteMode::Append, old_by_value(), None).unwrap();
    assert_eq!(first, old_by_value());
}
