//! Whether a column's values repeat enough for a Parquet dictionary to pay, judged on a
//! sample of them: [`dictionary_pays`].

use arrow_array::Array;

/// A column is dictionary-encoded when its sampled values repeat at least this many times on
/// average (see [`dictionary_pays`]).
const DICTIONARY_MIN_REPEATS: usize = 5;

/// Whether dictionary encoding pays for a column, judged on a sample of its values (the
/// chunks `arrays`): when values repeat at least [`DICTIONARY_MIN_REPEATS`] times on average.
/// Otherwise the dictionary holds most values once more, the indices are wide, and the
/// encoding costs a hash of every value: on lineitem, `l_partkey`, `l_extendedprice` and
/// `l_comment` (mostly distinct) and `l_orderkey` (four rows a key, in runs that plain
/// encoding and Snappy compress better) came out larger with dictionaries, and took a third of
/// the time spent writing. `None` for types judged by parquet's writer alone (nested, boolean,
/// dictionary columns) and for a sample without values.
pub(super) fn dictionary_pays(arrays: &[&dyn Array]) -> Option<bool> {
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
