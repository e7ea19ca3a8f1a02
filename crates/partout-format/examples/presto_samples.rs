//! Writes Presto pages with partout's encoder for Presto's own reader to check (the Java peer
//! test, `tests/java/presto-reader`, reads them with presto-spi 0.296 and prints every value):
//! `cargo run -p partout-format --example presto_samples -- DIR`.
//!
//! `DIR/pages.bin`: random batches of every type Presto carries (nulls, slices, nesting), one
//! page each, checksummed or not, some LZ4-compressed; `DIR/expected.txt`: what the reader must print, in its
//! type-less notation: fixed-width values as integers (floats as their bits, timestamps in
//! milliseconds, long decimals as "low:high" of their sign-and-magnitude words), bytes as hex,
//! `[..]` arrays, `{k=v,..}` maps, `(..)` rows, `null`.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use partout_format::presto::{PageOptions, encode_page};
use partout_testkit::{every_type, presto_carries, random_batch, rng};
use std::fmt::Write as _;

fn hex(bytes: &[u8], out: &mut String) -> std::fmt::Result {
    bytes.iter().try_for_each(|b| write!(out, "{b:02x}"))
}

/// Row `r` of `array` in the reader's notation.
fn dump(array: &dyn Array, r: usize, out: &mut String) {
    if let DataType::Dictionary(_, _) = array.data_type() {
        let dictionary = array.as_any_dictionary();
        if dictionary.keys().is_null(r) {
            out.push_str("null");
        } else {
            let key = dictionary.normalized_keys()[r];
            dump(dictionary.values().as_ref(), key, out);
        }
        return;
    }
    if array.logical_nulls().is_some_and(|n| n.is_null(r)) {
        out.push_str("null");
        return;
    }
    let _ = match array.data_type() {
        DataType::Boolean => write!(out, "{}", u8::from(array.as_boolean().value(r))),
        DataType::Int8 => write!(out, "{}", array.as_primitive::<Int8Type>().value(r)),
        DataType::Int16 => write!(out, "{}", array.as_primitive::<Int16Type>().value(r)),
        DataType::Int32 => write!(out, "{}", array.as_primitive::<Int32Type>().value(r)),
        DataType::Date32 => write!(out, "{}", array.as_primitive::<Date32Type>().value(r)),
        DataType::Float32 => {
            write!(
                out,
                "{}",
                array.as_primitive::<Float32Type>().value(r).to_bits() as i32
            )
        }
        DataType::Int64 => write!(out, "{}", array.as_primitive::<Int64Type>().value(r)),
        DataType::Float64 => {
            write!(
                out,
                "{}",
                array.as_primitive::<Float64Type>().value(r).to_bits() as i64
            )
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            write!(
                out,
                "{}",
                array.as_primitive::<TimestampMillisecondType>().value(r)
            )
        }
        DataType::Decimal64(_, _) => {
            write!(out, "{}", array.as_primitive::<Decimal64Type>().value(r))
        }
        DataType::Decimal128(p, _) => {
            let v = array.as_primitive::<Decimal128Type>().value(r);
            if *p <= 18 {
                write!(out, "{}", v as i64)
            } else {
                let magnitude = v.unsigned_abs();
                let high = (magnitude >> 64) as u64 | if v < 0 { 1 << 63 } else { 0 };
                write!(out, "{}:{}", magnitude as u64 as i64, high as i64)
            }
        }
        DataType::Utf8 => hex(array.as_string::<i32>().value(r).as_bytes(), out),
        DataType::LargeUtf8 => hex(array.as_string::<i64>().value(r).as_bytes(), out),
        DataType::Utf8View => hex(array.as_string_view().value(r).as_bytes(), out),
        DataType::Binary => hex(array.as_binary::<i32>().value(r), out),
        DataType::LargeBinary => hex(array.as_binary::<i64>().value(r), out),
        DataType::BinaryView => hex(array.as_binary_view().value(r), out),
        DataType::FixedSizeBinary(_) => hex(array.as_fixed_size_binary().value(r), out),
        DataType::RunEndEncoded(run_ends, _) => {
            let (values, physical) = match run_ends.data_type() {
                DataType::Int16 => {
                    let run = array.as_run::<Int16Type>();
                    (run.values(), run.get_physical_index(r))
                }
                DataType::Int32 => {
                    let run = array.as_run::<Int32Type>();
                    (run.values(), run.get_physical_index(r))
                }
                _ => {
                    let run = array.as_run::<Int64Type>();
                    (run.values(), run.get_physical_index(r))
                }
            };
            dump(values.as_ref(), physical, out);
            Ok(())
        }
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::ListView(_)
        | DataType::LargeListView(_) => {
            let elements = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().value(r),
                DataType::LargeList(_) => array.as_list::<i64>().value(r),
                DataType::ListView(_) => array.as_list_view::<i32>().value(r),
                _ => array.as_list_view::<i64>().value(r),
            };
            out.push('[');
            for i in 0..elements.len() {
                if i > 0 {
                    out.push(',');
                }
                dump(elements.as_ref(), i, out);
            }
            out.push(']');
            Ok(())
        }
        DataType::Map(_, _) => {
            let entries = array.as_map().value(r);
            out.push('{');
            for i in 0..entries.len() {
                if i > 0 {
                    out.push(',');
                }
                dump(entries.column(0).as_ref(), i, out);
                out.push('=');
                dump(entries.column(1).as_ref(), i, out);
            }
            out.push('}');
            Ok(())
        }
        DataType::Struct(_) => {
            let row = array.as_struct();
            out.push('(');
            for (i, field) in row.columns().iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                dump(field.as_ref(), r, out);
            }
            out.push(')');
            Ok(())
        }
        other => panic!("{other} is not carried"),
    };
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).ok_or("usage: presto_samples DIR")?);
    std::fs::create_dir_all(&dir)?;
    let mut rng = rng(2024);
    let types: Vec<DataType> = every_type()
        .into_iter()
        .filter(|t| presto_carries(t, false))
        .collect();
    let mut pages = Vec::new();
    let mut expected = String::new();
    let mut compressed = 0;
    let mut page = |batch: &RecordBatch,
                    checksum: bool,
                    lz4: bool|
     -> Result<(), Box<dyn std::error::Error>> {
        let start = pages.len();
        encode_page(batch, PageOptions { checksum, lz4 }, &mut pages)?;
        compressed += usize::from(pages[start + 4] & 0x01 != 0);
        let _ = writeln!(expected, "page {}", batch.num_rows());
        for r in 0..batch.num_rows() {
            for (c, column) in batch.columns().iter().enumerate() {
                if c > 0 {
                    expected.push('|');
                }
                dump(column.as_ref(), r, &mut expected);
            }
            expected.push('\n');
        }
        Ok(())
    };
    // Every type together, then each type alone at every null density.
    for (k, rows) in [0usize, 1, 40, 300].into_iter().enumerate() {
        let batch = random_batch(&types, rows, 0.3, k % 2 == 1, &mut rng);
        page(
            &batch.project(&(1..batch.num_columns()).collect::<Vec<_>>())?,
            k % 2 == 0,
            k >= 2,
        )?;
    }
    for data_type in &types {
        for density in [0.0, 0.5, 1.0] {
            let batch = random_batch(std::slice::from_ref(data_type), 25, density, true, &mut rng);
            page(&batch.project(&[1])?, true, density > 0.9)?;
        }
    }
    // Repetitive values compress: some pages go out LZ4-compressed, as Presto's exchange
    // sends them.
    let repeated = arrow_array::StringArray::from(vec!["the same value, again and again"; 2000]);
    let batch = RecordBatch::try_from_iter([("s", std::sync::Arc::new(repeated) as _)])?;
    page(&batch, true, true)?;
    page(&batch, false, true)?;
    assert!(compressed >= 2, "{compressed} compressed pages");
    std::fs::write(dir.join("pages.bin"), &pages)?;
    std::fs::write(dir.join("expected.txt"), expected)?;
    Ok(())
}
