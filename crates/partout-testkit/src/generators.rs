//! Seeded generators: random arrays of every supported type (with null densities and
//! offsets), batches of them, partition ids in chosen patterns, and the sample table the Python
//! tests recompute.

use crate::types::field;
use arrow_array::{
    Array, ArrayRef, BinaryViewArray, BooleanArray, FixedSizeListArray, GenericBinaryArray,
    GenericListArray, GenericListViewArray, GenericStringArray, MapArray, NullArray,
    OffsetSizeTrait, RecordBatch, RecordBatchOptions, StringViewArray, StructArray, UInt32Array,
    UnionArray, make_array,
};
use arrow_buffer::{BooleanBuffer, NullBuffer, OffsetBuffer};
use arrow_data::ArrayDataBuilder;
use arrow_schema::{DataType, Field, Schema, UnionMode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// The generator every helper takes: small, fast and seeded.
pub type TestRng = SmallRng;

/// A seeded generator.
pub fn rng(seed: u64) -> TestRng {
    SmallRng::seed_from_u64(seed)
}

/// A validity bitmap with about `density` of the rows null; none at all for density 0.
pub fn random_nulls(len: usize, density: f64, rng: &mut TestRng) -> Option<NullBuffer> {
    if density <= 0.0 {
        return None;
    }
    let valid: BooleanBuffer = (0..len)
        .map(|_| !rng.random_bool(density.min(1.0)))
        .collect();
    Some(NullBuffer::new(valid))
}

fn random_bytes(len: usize, rng: &mut TestRng) -> Vec<u8> {
    (0..len).map(|_| rng.random()).collect()
}

fn random_string(rng: &mut TestRng) -> String {
    const ALPHABET: [&str; 8] = ["a", "b", "Z", "0", " ", "é", "日", "🦀"];
    // Mostly short strings (inline views), some long ones (out-of-line views).
    let len = if rng.random_bool(0.3) {
        rng.random_range(13..40)
    } else {
        rng.random_range(0..13)
    };
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())])
        .collect()
}

fn random_lengths(len: usize, max: usize, rng: &mut TestRng) -> Vec<usize> {
    (0..len).map(|_| rng.random_range(0..=max)).collect()
}

fn offsets_of<O: OffsetSizeTrait>(lengths: &[usize]) -> OffsetBuffer<O> {
    OffsetBuffer::from_lengths(lengths.iter().copied())
}

/// A seeded array of `data_type` and `len` rows, about `null_density` of them null
/// (0 gives an array with no null buffer). Nested children get their own random nulls.
///
/// # Panics
/// For a type outside [`every_type`](crate::every_type)'s families.
pub fn random_array(
    data_type: &DataType,
    len: usize,
    null_density: f64,
    rng: &mut TestRng,
) -> ArrayRef {
    use DataType::*;
    let nulls = random_nulls(len, null_density, rng);
    if let Some(width) = data_type.primitive_width() {
        let mut bytes = random_bytes(len * width, rng);
        if *data_type == Float16 {
            // Keep half floats finite: the top exponent bit clear never makes NaN or infinity.
            bytes.iter_mut().skip(1).step_by(2).for_each(|b| *b &= 0xbf);
        }
        return build(
            ArrayDataBuilder::new(data_type.clone())
                .len(len)
                .add_buffer(bytes.into())
                .nulls(nulls),
        );
    }
    match data_type {
        Null => Arc::new(NullArray::new(len)),
        Boolean => Arc::new(BooleanArray::new(
            (0..len).map(|_| rng.random::<bool>()).collect(),
            nulls,
        )),
        FixedSizeBinary(width) => {
            let bytes = random_bytes(len * *width as usize, rng);
            build(
                ArrayDataBuilder::new(data_type.clone())
                    .len(len)
                    .add_buffer(bytes.into())
                    .nulls(nulls),
            )
        }
        Utf8 => Arc::new(GenericStringArray::<i32>::from(random_strings(
            len, &nulls, rng,
        ))),
        LargeUtf8 => Arc::new(GenericStringArray::<i64>::from(random_strings(
            len, &nulls, rng,
        ))),
        Utf8View => Arc::new(StringViewArray::from(random_strings(len, &nulls, rng))),
        Binary => Arc::new(GenericBinaryArray::<i32>::from_iter(random_binaries(
            len, &nulls, rng,
        ))),
        LargeBinary => Arc::new(GenericBinaryArray::<i64>::from_iter(random_binaries(
            len, &nulls, rng,
        ))),
        BinaryView => Arc::new(BinaryViewArray::from_iter(random_binaries(
            len, &nulls, rng,
        ))),
        Dictionary(key_type, value_type) => {
            let dict_len = rng.random_range(1..8usize);
            let values = random_array(value_type, dict_len, 0.2, rng);
            let width = key_type.primitive_width().expect("integer key");
            let keys: Vec<u8> = (0..len)
                .flat_map(|_| {
                    (rng.random_range(0..dict_len) as u64).to_le_bytes()[..width].to_vec()
                })
                .collect();
            build(
                ArrayDataBuilder::new(data_type.clone())
                    .len(len)
                    .add_buffer(keys.into())
                    .child_data(vec![values.to_data()])
                    .nulls(nulls),
            )
        }
        Struct(fields) => {
            let columns = fields.iter().map(|f| random_child(f, len, rng)).collect();
            Arc::new(
                StructArray::try_new_with_length(fields.clone(), columns, nulls, len)
                    .expect("valid struct"),
            )
        }
        List(item) => random_list::<i32>(item, len, nulls, rng),
        LargeList(item) => random_list::<i64>(item, len, nulls, rng),
        FixedSizeList(item, size) => {
            let values = random_child(item, len * *size as usize, rng);
            Arc::new(
                FixedSizeListArray::try_new_with_length(item.clone(), *size, values, nulls, len)
                    .expect("valid fixed-size list"),
            )
        }
        Map(entries, sorted) => {
            let lengths = random_lengths(len, 3, rng);
            let DataType::Struct(fields) = entries.data_type() else {
                panic!("map entries are a struct")
            };
            let total = lengths.iter().sum();
            let columns = fields.iter().map(|f| random_child(f, total, rng)).collect();
            let entries_array =
                StructArray::try_new(fields.clone(), columns, None).expect("valid entries");
            Arc::new(
                MapArray::try_new(
                    entries.clone(),
                    offsets_of(&lengths),
                    entries_array,
                    nulls,
                    *sorted,
                )
                .expect("valid map"),
            )
        }
        ListView(item) => random_list_view::<i32>(item, len, nulls, rng),
        LargeListView(item) => random_list_view::<i64>(item, len, nulls, rng),
        RunEndEncoded(run_ends, values) => random_runs(run_ends.data_type(), values, len, rng),
        Union(fields, UnionMode::Dense) => {
            let ids: Vec<i8> = fields.iter().map(|(id, _)| id).collect();
            let slots: Vec<usize> = (0..len).map(|_| rng.random_range(0..ids.len())).collect();
            let mut counts = vec![0usize; ids.len()];
            // Offsets in order within each child (as the format asks), the children a little
            // longer than their rows need.
            let offsets: Vec<i32> = slots
                .iter()
                .map(|&c| {
                    counts[c] += rng.random_range(1..3);
                    counts[c] as i32 - 1
                })
                .collect();
            let type_ids: Vec<i8> = slots.iter().map(|&c| ids[c]).collect();
            let children = fields
                .iter()
                .zip(&counts)
                .map(|((_, f), &count)| random_child(f, count + rng.random_range(0..3), rng))
                .collect();
            Arc::new(
                UnionArray::try_new(
                    fields.clone(),
                    type_ids.into(),
                    Some(offsets.into()),
                    children,
                )
                .expect("valid dense union"),
            )
        }
        Union(fields, UnionMode::Sparse) => {
            let ids: Vec<i8> = fields.iter().map(|(id, _)| id).collect();
            let type_ids: Vec<i8> = (0..len)
                .map(|_| ids[rng.random_range(0..ids.len())])
                .collect();
            let children = fields
                .iter()
                .map(|(_, f)| random_child(f, len, rng))
                .collect();
            Arc::new(
                UnionArray::try_new(fields.clone(), type_ids.into(), None, children)
                    .expect("valid union"),
            )
        }
        other => panic!("no generator for {other}"),
    }
}

/// A child column: half nulls where the field allows them, none where it does not.
fn random_child(field: &Field, len: usize, rng: &mut TestRng) -> ArrayRef {
    let density = if field.is_nullable() { 0.5 } else { 0.0 };
    random_array(field.data_type(), len, density, rng)
}

fn random_list<O: OffsetSizeTrait>(
    item: &Arc<Field>,
    len: usize,
    nulls: Option<NullBuffer>,
    rng: &mut TestRng,
) -> ArrayRef {
    let lengths = random_lengths(len, 4, rng);
    let values = random_child(item, lengths.iter().sum(), rng);
    Arc::new(
        GenericListArray::<O>::try_new(item.clone(), offsets_of(&lengths), values, nulls)
            .expect("valid list"),
    )
}

/// A list view whose rows name random, often overlapping, ranges of one child in no order.
fn random_list_view<O: OffsetSizeTrait>(
    item: &Arc<Field>,
    len: usize,
    nulls: Option<NullBuffer>,
    rng: &mut TestRng,
) -> ArrayRef {
    let child_len = rng.random_range(0..=len * 2 + 1);
    let values = random_child(item, child_len, rng);
    let mut offsets = Vec::with_capacity(len);
    let mut sizes = Vec::with_capacity(len);
    for _ in 0..len {
        let offset = rng.random_range(0..=child_len);
        let size = rng.random_range(0..=(child_len - offset).min(4));
        offsets.push(O::usize_as(offset));
        sizes.push(O::usize_as(size));
    }
    Arc::new(
        GenericListViewArray::<O>::try_new(
            item.clone(),
            offsets.into(),
            sizes.into(),
            values,
            nulls,
        )
        .expect("valid list view"),
    )
}

/// A run-end encoded array of `len` rows in runs of 1 to 6 rows (some of 20), its values
/// random (nulls among them where the field allows).
fn random_runs(run_end_type: &DataType, values: &Field, len: usize, rng: &mut TestRng) -> ArrayRef {
    let mut ends = Vec::new();
    let mut end = 0usize;
    while end < len {
        let run = if rng.random_bool(0.1) {
            20
        } else {
            rng.random_range(1..=6)
        };
        end = (end + run).min(len);
        ends.push(end as i64);
    }
    let run_ends: ArrayRef = match run_end_type {
        DataType::Int16 => Arc::new(arrow_array::Int16Array::from_iter_values(
            ends.iter()
                .map(|&e| i16::try_from(e).expect("run ends fit i16")),
        )),
        DataType::Int32 => Arc::new(arrow_array::Int32Array::from_iter_values(
            ends.iter().map(|&e| e as i32),
        )),
        _ => Arc::new(arrow_array::Int64Array::from(ends.clone())),
    };
    let values = random_child(values, ends.len(), rng);
    let data_type = DataType::RunEndEncoded(
        Arc::new(Field::new("run_ends", run_end_type.clone(), false)),
        Arc::new(Field::new("values", values.data_type().clone(), true)),
    );
    build(
        ArrayDataBuilder::new(data_type)
            .len(len)
            .add_child_data(run_ends.to_data())
            .add_child_data(values.to_data()),
    )
}

fn random_strings(
    len: usize,
    nulls: &Option<NullBuffer>,
    rng: &mut TestRng,
) -> Vec<Option<String>> {
    (0..len)
        .map(|i| {
            let s = random_string(rng);
            nulls.as_ref().is_none_or(|n| n.is_valid(i)).then_some(s)
        })
        .collect()
}

fn random_binaries(
    len: usize,
    nulls: &Option<NullBuffer>,
    rng: &mut TestRng,
) -> Vec<Option<Vec<u8>>> {
    random_strings(len, nulls, rng)
        .into_iter()
        .map(|s| s.map(String::into_bytes))
        .collect()
}

fn build(builder: ArrayDataBuilder) -> ArrayRef {
    make_array(
        builder
            .align_buffers(true)
            .build()
            .expect("generator built a valid array"),
    )
}

/// Like [`random_array`], but the result is a slice at a random non-zero offset of a longer
/// array, so kernels must honour offsets.
pub fn random_sliced_array(
    data_type: &DataType,
    len: usize,
    null_density: f64,
    rng: &mut TestRng,
) -> ArrayRef {
    let before = rng.random_range(1..70);
    let after = rng.random_range(0..5);
    random_array(data_type, before + len + after, null_density, rng).slice(before, len)
}

/// A batch with one column per type in `types`, plus a leading `row` column (UInt32, the
/// row number) that makes every row distinguishable.
pub fn random_batch(
    types: &[DataType],
    len: usize,
    null_density: f64,
    sliced: bool,
    rng: &mut TestRng,
) -> RecordBatch {
    let mut fields = vec![Field::new("row", DataType::UInt32, false)];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(UInt32Array::from_iter_values(0..len as u32))];
    for (i, data_type) in types.iter().enumerate() {
        fields.push(field(&format!("c{i}"), data_type.clone()));
        columns.push(if sliced {
            random_sliced_array(data_type, len, null_density, rng)
        } else {
            random_array(data_type, len, null_density, rng)
        });
    }
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(len)),
    )
    .expect("valid batch")
}

/// How partition ids are spread over rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdPattern {
    /// Every row's id independently uniform.
    Uniform,
    /// Runs of equal ids with the given mean length (real keys: lineitem has ~4 rows per order).
    Runs(usize),
    /// Every row to the same destination.
    AllTo(u32),
}

/// `len` partition ids below `num_partitions` following `pattern`.
///
/// # Panics
/// If `num_partitions` is 0, or `AllTo(p)` names a `p` not below it.
pub fn random_ids(
    len: usize,
    num_partitions: u32,
    pattern: IdPattern,
    rng: &mut TestRng,
) -> Vec<u32> {
    assert!(num_partitions > 0);
    match pattern {
        IdPattern::Uniform => (0..len)
            .map(|_| rng.random_range(0..num_partitions))
            .collect(),
        IdPattern::Runs(mean) => {
            let mut ids = Vec::with_capacity(len);
            while ids.len() < len {
                let id = rng.random_range(0..num_partitions);
                let run = rng.random_range(1..=2 * mean.max(1) - 1);
                ids.extend(std::iter::repeat_n(id, run.min(len - ids.len())));
            }
            ids
        }
        IdPattern::AllTo(p) => {
            assert!(p < num_partitions);
            vec![p; len]
        }
    }
}

/// A batch of `columns`, named `c0`, `c1`, … in order, each nullable.
///
/// # Panics
/// When the columns' lengths differ.
pub fn batch_of(columns: Vec<ArrayRef>) -> RecordBatch {
    let fields: Vec<Field> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("columns of one length")
}

/// Rows `start..start + len` of the sample table the Python tests recompute: every value a
/// function of its row number `i`: `id = i`, `name = "row-{i}"` (null when `i % 7 == 3`),
/// `label` the same as Utf8View with every fifth value longer than 12 bytes, `score = i * 0.5`,
/// `tags = [i, i + 1]` (Int32).
///
/// # Panics
/// Never for valid ranges.
pub fn sample_batch(start: usize, len: usize) -> RecordBatch {
    let rows = start..start + len;
    let name = |i: usize| (i % 7 != 3).then(|| format!("row-{i}"));
    let label = |i: usize| {
        if i.is_multiple_of(5) {
            format!("a longer label {i}")
        } else {
            format!("l{i}")
        }
    };
    let mut tags =
        arrow_array::builder::ListBuilder::new(arrow_array::builder::Int32Builder::new());
    for i in rows.clone() {
        tags.values().append_value(i as i32);
        tags.values().append_value(i as i32 + 1);
        tags.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(arrow_array::Int64Array::from_iter_values(
            rows.clone().map(|i| i as i64),
        )),
        Arc::new(arrow_array::StringArray::from_iter(rows.clone().map(name))),
        Arc::new(arrow_array::StringViewArray::from_iter_values(
            rows.clone().map(label),
        )),
        Arc::new(arrow_array::Float64Array::from_iter_values(
            rows.clone().map(|i| i as f64 * 0.5),
        )),
        Arc::new(tags.finish()),
    ];
    let fields: Vec<Field> = ["id", "name", "label", "score", "tags"]
        .iter()
        .zip(&columns)
        .map(|(name, column)| Field::new(*name, column.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("a valid batch")
}
