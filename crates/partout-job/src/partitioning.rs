//! The partitioning a job's options ask for, resolved against the inputs: range split
//! points sampled from them, and described for the manifest.

use crate::error::{JobError, Result, writing};
use crate::options::{JobOptions, Scheme};
use partout_core::PartoutError;
use partout_core::ids::{Partitioning, PartitioningSpec};
use partout_input::Frames;

/// Frames sampled for range bounds.
const SAMPLE_FRAMES: usize = 64;

/// Range partitioning's sample of the input: the key columns of the first batch of up to
/// [`SAMPLE_FRAMES`] frames spread over it. `None` without keys or with a key the input does
/// not have (resolving the partitioning says which).
fn sample(frames: &Frames, spec: &PartitioningSpec) -> Result<Option<arrow_array::RecordBatch>> {
    let keys = match spec.key_columns(&frames.schema) {
        Ok(keys) if !keys.is_empty() => keys,
        _ => return Ok(None),
    };
    let count = frames.frames.len();
    let picks = count.min(SAMPLE_FRAMES);
    let mut samples = Vec::with_capacity(picks);
    let failed = |e: arrow_schema::ArrowError| writing("sampling range bounds")(e.into());
    for i in 0..picks {
        let frame = &frames.frames[i * count / picks];
        if let Some(batch) = frame.read(&frames.schema)?.next() {
            samples.push(batch?.project(&keys).map_err(failed)?);
        }
    }
    let schema = std::sync::Arc::new(frames.schema.project(&keys).map_err(failed)?);
    let sample = arrow_select::concat::concat_batches(&schema, &samples).map_err(failed)?;
    Ok(Some(sample))
}

/// The split points of range partitioning, each as its key values' text.
pub(crate) fn describe_bounds(partitioning: &Partitioning) -> Option<Vec<Vec<String>>> {
    let splits = &partitioning.bounds()?.splits;
    let options = arrow_cast::display::FormatOptions::default().with_null("null");
    let formatters: Vec<_> = splits
        .columns()
        .iter()
        .map(|c| arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<_, _>>()
        .ok()?;
    Some(
        (0..splits.num_rows())
            .map(|r| formatters.iter().map(|f| f.value(r).to_string()).collect())
            .collect(),
    )
}

/// The partitioning the options ask for ([`PartitioningSpec::resolve`]; range split points
/// from a [`sample`] of the input). Options that cannot work are [`JobError::InvalidOption`]s;
/// key types the scheme cannot take are errors of `context`.
pub(crate) fn partitioning(
    options: &JobOptions,
    frames: &Frames,
    context: String,
) -> Result<Partitioning> {
    let spec = PartitioningSpec::new(options.scheme, &options.keys, options.partitions);
    let sample = match spec.scheme {
        Scheme::Range => sample(frames, &spec)?,
        _ => None,
    };
    spec.resolve(&frames.schema, sample.as_ref())
        .map_err(|e| match e {
            PartoutError::InvalidArgument(what) => JobError::InvalidOption(what),
            e @ PartoutError::MissingKeyColumn { .. } => JobError::InvalidOption(e.to_string()),
            e => writing(context)(e.into()),
        })
}
