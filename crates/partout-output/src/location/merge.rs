//! Adding a run to the output already at a location ([`WriteMode::Append`]), or replacing the
//! partitions it wrote ([`WriteMode::OverwritePartitions`]): the manifest of the output as it
//! will be, from the one there and the run's own, and the files of the old output that go.
//!
//! ```text
//!  old manifest ─┐
//!                ├─ compatible? (format, layout, compression, scheme, keys, partition columns,
//!  run's own ────┘   destinations or split points) ─► destinations merged ─► Merged
//!                    append: a destination's files are the old ones, then the run's
//!                    overwrite-partitions: a value directory the run wrote is the run's alone
//! ```
//!
//! Destinations partitioned by value are matched by their directory (`year=2024`) and their
//! bucket within it; the others by their number.

use super::{OutputError, Result, WriteMode};
use crate::SortOrder;
use crate::manifest::{Compression, DestinationEntry, Format, Layout, Manifest, RowGroupSizes};
use partout_core::ids::Scheme;
use std::collections::{HashMap, HashSet};

/// The output as it will be once a run is committed into the one there.
#[derive(Debug)]
pub(crate) struct Merged {
    /// Its manifest.
    pub(crate) manifest: Manifest,
    /// The old output's files that no longer belong to it (the value directories a run
    /// rewrote), by name.
    pub(crate) dropped: Vec<String>,
}

/// What a run is, as far as adding it to an output there goes.
#[derive(Debug, Clone, Copy)]
pub struct RunShape<'a> {
    /// Its format.
    pub format: Format,
    /// Its compression.
    pub compression: Compression,
    /// Its layout.
    pub layout: Layout,
    /// Its scheme.
    pub scheme: Scheme,
    /// Its key columns.
    pub keys: &'a [String],
    /// The columns it partitions by value.
    pub partition_by: &'a [String],
    /// Its destinations (partitioning by value: buckets of each value).
    pub partitions: u32,
    /// The order of rows within its files.
    pub sort_by: &'a SortOrder,
}

impl<'a> RunShape<'a> {
    /// The shape of the run `manifest` records.
    pub fn of(manifest: &'a Manifest) -> Self {
        Self {
            format: manifest.format,
            compression: manifest.compression,
            layout: manifest.layout,
            scheme: manifest.scheme,
            keys: &manifest.keys,
            partition_by: &manifest.partition_by,
            partitions: manifest.partitions,
            sort_by: &manifest.sort_by,
        }
    }
}

/// Checks that a run shaped `run` can be added to the output `old` records (if any) as `mode`
/// says:
/// the same format, compression, layout, scheme, keys, partition columns and order within
/// files, and (not
/// partitioning by value) as many destinations; overwrite-partitions only partitioning by
/// value. Made before the run, so that nothing is written for a run that cannot be added.
///
/// # Errors
/// [`OutputError::Invalid`] naming what differs.
pub fn check_compatible(old: Option<&Manifest>, run: &RunShape<'_>, mode: WriteMode) -> Result<()> {
    let differs = |what: &str, there: String, this: String| {
        Err(OutputError::Invalid(format!(
            "{mode} adds only a run like the output there: its {what} is {there}, this run's \
             {this}"
        )))
    };
    if mode == WriteMode::OverwritePartitions && run.partition_by.is_empty() {
        return Err(OutputError::Invalid(
            "overwrite-partitions replaces the value directories a run writes: it takes \
             partitioning by value (partition_by)"
                .into(),
        ));
    }
    let Some(old) = old else {
        return Ok(());
    };
    if old.format != run.format {
        return differs("format", old.format.to_string(), run.format.to_string());
    }
    if old.compression != run.compression {
        return differs(
            "compression",
            old.compression.to_string(),
            run.compression.to_string(),
        );
    }
    if old.layout != run.layout {
        return differs("layout", old.layout.to_string(), run.layout.to_string());
    }
    if old.partition_by != run.partition_by {
        return differs(
            "partitioning by value",
            format!("{:?}", old.partition_by),
            format!("{:?}", run.partition_by),
        );
    }
    if old.scheme != run.scheme || old.keys != run.keys {
        return differs(
            "scheme",
            format!("{} of {:?}", old.scheme, old.keys),
            format!("{} of {:?}", run.scheme, run.keys),
        );
    }
    if old.sort_by != *run.sort_by {
        let order = |o: &SortOrder| match o.is_empty() {
            true => "none".to_string(),
            false => o.to_string(),
        };
        return differs(
            "order within files",
            order(&old.sort_by),
            order(run.sort_by),
        );
    }
    if run.partition_by.is_empty() && old.partitions != run.partitions {
        return differs(
            "destination count",
            old.partitions.to_string(),
            run.partitions.to_string(),
        );
    }
    Ok(())
}

/// `new` committed into `old` as `mode` says (append or overwrite-partitions).
///
/// # Errors
/// As [`check_compatible`]; [`OutputError::Invalid`] for other split points (range
/// partitioning), a value directory with another number of buckets than the run's, or a
/// file name both have.
pub(crate) fn merge(old: Manifest, new: Manifest, mode: WriteMode) -> Result<Merged> {
    check_compatible(Some(&old), &RunShape::of(&new), mode)?;
    if old.range_bounds != new.range_bounds {
        return Err(OutputError::Invalid(format!(
            "{mode} adds only a run like the output there: its split points are {:?}, this \
             run's {:?}",
            old.range_bounds, new.range_bounds
        )));
    }
    let mut dropped = Vec::new();
    let mut destinations = match new.partition_by.is_empty() {
        // Destinations by number: each one's files, the old then the run's.
        true => old
            .destinations
            .into_iter()
            .zip(new.destinations.iter())
            .map(|(mut entry, run)| {
                add(&mut entry, run);
                entry
            })
            .collect(),
        false => by_directory(old.destinations, &new.destinations, mode, &mut dropped)?,
    };
    for (p, entry) in destinations.iter_mut().enumerate() {
        entry.destination = p as u32;
    }
    let names: Vec<&str> = destinations
        .iter()
        .flat_map(|d| d.files.iter().flatten().map(|f| f.name.as_str()))
        .collect();
    let mut seen = HashSet::with_capacity(names.len());
    if let Some(twice) = names.iter().find(|n| !seen.insert(**n)) {
        return Err(OutputError::Invalid(format!(
            "the output there has a file named {twice:?} already"
        )));
    }
    let mut shuffle_files = old.shuffle_files;
    if let Some(run) = new.shuffle_files.clone() {
        shuffle_files.get_or_insert_with(Vec::new).extend(run);
    }
    let manifest = Manifest {
        partitions: destinations.len() as u32,
        output_rows: destinations.iter().map(|d| d.rows).sum(),
        output_bytes: destinations.iter().map(|d| d.bytes).sum(),
        row_groups: RowGroupSizes::of_files(&destinations),
        destinations,
        shuffle_files,
        ..new
    };
    Ok(Merged { manifest, dropped })
}

/// `run`'s files added after `entry`'s.
fn add(entry: &mut DestinationEntry, run: &DestinationEntry) {
    entry.rows += run.rows;
    entry.bytes += run.bytes;
    if let Some(files) = &run.files {
        entry
            .files
            .get_or_insert_with(Default::default)
            .extend(files.iter().cloned());
    }
}

/// Destinations partitioned by value merged by directory: each of the run's value directories
/// replaces the old one's (overwrite-partitions, its files `dropped`) or adds its files to
/// the old one's, bucket by bucket (append); directories the run did not write are kept, in
/// their order, the run's new ones after them.
fn by_directory(
    old: Vec<DestinationEntry>,
    new: &[DestinationEntry],
    mode: WriteMode,
    dropped: &mut Vec<String>,
) -> Result<Vec<DestinationEntry>> {
    let directory = |d: &DestinationEntry| d.directory().unwrap_or_default().to_string();
    let mut run: HashMap<String, Vec<&DestinationEntry>> = HashMap::new();
    let mut order = Vec::new();
    for entry in new {
        let dir = directory(entry);
        if !run.contains_key(&dir) {
            order.push(dir.clone());
        }
        run.entry(dir).or_default().push(entry);
    }
    let mut merged = Vec::with_capacity(old.len() + new.len());
    let mut met = HashSet::new();
    let mut buckets: HashMap<String, usize> = HashMap::new();
    for mut entry in old {
        let dir = directory(&entry);
        let Some(runs) = run.get(&dir) else {
            merged.push(entry);
            continue;
        };
        met.insert(dir.clone());
        let bucket = buckets.entry(dir.clone()).or_default();
        let k = *bucket;
        *bucket += 1;
        match mode {
            WriteMode::Append => {
                let Some(run) = runs.get(k) else {
                    return Err(OutputError::Invalid(format!(
                        "{dir} has more buckets in the output there than this run's {}",
                        runs.len()
                    )));
                };
                add(&mut entry, run);
                merged.push(entry);
            }
            _ => {
                dropped.extend(entry.files.into_iter().flatten().map(|f| f.name));
                if k == 0 {
                    merged.extend(runs.iter().map(|&e| e.clone()));
                }
            }
        }
    }
    if mode == WriteMode::Append {
        for (dir, runs) in &run {
            let had = buckets.get(dir).copied().unwrap_or(0);
            if met.contains(dir) && had != runs.len() {
                return Err(OutputError::Invalid(format!(
                    "{dir} has {had} bucket(s) in the output there, {} in this run",
                    runs.len()
                )));
            }
        }
    }
    for dir in order.iter().filter(|d| !met.contains(*d)) {
        merged.extend(run[dir].iter().map(|&e| e.clone()));
    }
    Ok(merged)
}
