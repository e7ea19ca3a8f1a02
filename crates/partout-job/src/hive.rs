//! Hive-style partition directory names: `col=value` path segments.
//!
//! A dataset partitioned by value in the Hive layout looks like
//! `OUT/col=value/col2=value2/part-00000.parquet`. This module turns the rows
//! of an Arrow array into their `value` texts ([`format_values`]), escapes them
//! the way Hive and Spark do ([`escape_path_name`]) and builds the directory
//! segment ([`partition_segment`]).
//!
//! # Escaping
//!
//! The escaped set is the union of the sets used by
//!
//! * Spark, `org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils.charToEscape`
//!   (`sql/catalyst/src/main/scala/org/apache/spark/sql/catalyst/catalog/ExternalCatalogUtils.scala`):
//!   U+0001..=U+001F, `"`, `#`, `%`, `'`, `*`, `/`, `:`, `=`, `?`, `\`,
//!   U+007F, `{`, `[`, `]`, `^`;
//! * Hive, `org.apache.hadoop.hive.common.FileUtils.charToEscape`
//!   (`common/src/java/org/apache/hadoop/hive/common/FileUtils.java`): the same
//!   list, plus a loop that marks every char below `' '`, so it also escapes
//!   U+0000.
//!
//! U+0000 is therefore escaped too (Spark would write it raw, which no POSIX
//! file system accepts in a name; Spark's unescape decodes `%00` fine).
//! Both projects add `' '`, `<`, `>` and `|` only when running on Windows;
//! this module follows the non-Windows set, so a space stays a space.
//!
//! Each escaped char becomes `%XX`, two uppercase hex digits of its code.
//! Chars at or above U+0080 are never escaped and stay UTF-8: Spark's
//! `unescapePathName` decodes each `%XX` to the single char U+00XX, so a
//! percent-encoded UTF-8 byte sequence would come back as Latin-1 mojibake.
//!
//! # Nulls and empty strings
//!
//! A null value is written as [`NULL_DIR`] (`__HIVE_DEFAULT_PARTITION__`),
//! which all common readers map back to null. An empty string is written as
//! `col=` (its own value). Hive's and Spark's writers instead map the empty
//! string to `__HIVE_DEFAULT_PARTITION__` as well, so in data they wrote the
//! two are indistinguishable; readers used here (pyarrow, DuckDB, Polars) read
//! `col=` back as `""`. A string whose value is literally
//! `__HIVE_DEFAULT_PARTITION__` cannot be told apart from null (no escape
//! applies to it).

use arrow_array::Array;
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{ArrowError, DataType};
use partout_core::ids::is_value_key_type;

/// Directory value that stands for a null partition value (Hive's
/// `ConfVars.DEFAULTPARTITIONNAME`, Spark's `DEFAULT_PARTITION_NAME`).
pub const NULL_DIR: &str = "__HIVE_DEFAULT_PARTITION__";

/// The printable ASCII chars (besides the control chars) that are escaped;
/// see the module docs for where the list comes from.
const ESCAPED_PUNCTUATION: &[u8] = b"\"#%'*/:=?\\{[]^";

/// Lookup table over ASCII: `true` where the char must be escaped.
const NEEDS_ESCAPE: [bool; 128] = build_escape_table();

/// Builds [`NEEDS_ESCAPE`]: U+0000..=U+001F, U+007F and
/// [`ESCAPED_PUNCTUATION`].
const fn build_escape_table() -> [bool; 128] {
    let mut table = [false; 128];
    let mut c = 0;
    while c < 0x20 {
        table[c] = true;
        c += 1;
    }
    table[0x7F] = true;
    let mut i = 0;
    while i < ESCAPED_PUNCTUATION.len() {
        table[ESCAPED_PUNCTUATION[i] as usize] = true;
        i += 1;
    }
    table
}

/// Whether `c` is in the escaped set (always `false` for non-ASCII).
fn needs_escape(c: char) -> bool {
    (c as u32) < 128 && NEEDS_ESCAPE[c as usize]
}

/// Escapes a partition value (or column name) for use in a directory name,
/// as Hive's and Spark's `escapePathName` do (non-Windows set).
///
/// Every char in the escaped set (see the module docs) becomes `%XX` with two
/// uppercase hex digits; every other char, including all non-ASCII ones, is
/// copied unchanged. The empty string stays empty.
pub fn escape_path_name(value: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if needs_escape(c) {
            let b = c as u8;
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0x0F)] as char);
        } else {
            out.push(c);
        }
    }
    out
}

/// Value of one ASCII hex digit, or `None`.
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The byte written as two hex digits in `pair`, or `None`.
fn hex_pair(pair: &[u8]) -> Option<u8> {
    match pair {
        [hi, lo] => Some(hex_digit(*hi)? << 4 | hex_digit(*lo)?),
        _ => None,
    }
}

/// Reverses [`escape_path_name`], as Spark's and Hive's `unescapePathName`.
///
/// Each `%` followed by two hex digits (either case) is replaced by the char
/// whose code is that number, U+0000..=U+00FF: like Spark, `%C3%A9` becomes
/// `"Ã©"`, not `"é"` (which is why non-ASCII is never escaped). A `%` not
/// followed by two hex digits is kept literally. One deliberate difference:
/// Java's `Integer.parseInt` also accepts a sign, so Spark reads `%+A` as
/// U+000A; here it stays literal. [`escape_path_name`] never produces it.
pub fn unescape_path_name(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut rest = 0; // start of the not yet copied part of `s`
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(code) = bytes.get(i + 1..i + 3).and_then(hex_pair)
        {
            // `i` and `i + 3` are char boundaries: `%` and hex digits are ASCII.
            out.push_str(&s[rest..i]);
            out.push(char::from(code));
            i += 3;
            rest = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&s[rest..]);
    out
}

/// The directory segment for one partition column: `col=value` with both
/// parts escaped by [`escape_path_name`], or `col=__HIVE_DEFAULT_PARTITION__`
/// when `value` is `None`. `Some("")` gives `col=`.
///
/// The column name is escaped too, as Spark's `getPartitionPathString` does;
/// for ordinary names this changes nothing.
pub fn partition_segment(column: &str, value: Option<&str>) -> String {
    match value {
        Some(v) => format!("{}={}", escape_path_name(column), escape_path_name(v)),
        None => format!("{}={NULL_DIR}", escape_path_name(column)),
    }
}

/// Timestamps without a zone: the wall clock, fractional seconds only when not zero (3, 6 or
/// 9 digits), as pyarrow, DuckDB and Polars parse it back.
const TIMESTAMP_FORMAT: &str = "%Y-%m-%d %H:%M:%S%.f";
/// Timestamps with a zone: the instant's UTC wall clock marked `Z`. Without the mark DuckDB
/// reads the text in its session's time zone and moves the instant; with it pyarrow, DuckDB
/// and Polars read back the same instant. (Trino's Hive connector refuses the `Z`.)
const TIMESTAMP_UTC_FORMAT: &str = "%Y-%m-%d %H:%M:%S%.fZ";

/// The partition value text of every row of `array`, `None` for a null: integers and
/// decimals as plain numbers (decimals at the column's scale: `-12.50`), booleans as `true`
/// and `false`, strings as they are, dates as `YYYY-MM-DD`, timestamps as above; a
/// dictionary's values. Formatting is arrow-cast's.
///
/// # Errors
/// A type partitioning by value does not take
/// ([`partout_core::ids::is_value_key_type`]), named.
pub fn format_values(array: &dyn Array) -> Result<Vec<Option<String>>, ArrowError> {
    let data_type = array.data_type();
    if !is_value_key_type(data_type) {
        return Err(ArrowError::InvalidArgumentError(format!(
            "a partition value of type {data_type} has no text form"
        )));
    }
    // A dictionary's values; a zoned timestamp's instant in UTC.
    let plain = match data_type {
        DataType::Dictionary(_, value) => arrow_cast::cast(array, value)?,
        _ => arrow_array::make_array(array.to_data()),
    };
    let plain = match plain.data_type() {
        DataType::Timestamp(unit, Some(_)) => {
            arrow_cast::cast(&plain, &DataType::Timestamp(*unit, Some("+00:00".into())))?
        }
        _ => plain,
    };
    let options = FormatOptions::default()
        .with_date_format(Some("%Y-%m-%d"))
        // Date64: the day, as Date32.
        .with_datetime_format(Some("%Y-%m-%d"))
        .with_timestamp_format(Some(TIMESTAMP_FORMAT))
        .with_timestamp_tz_format(Some(TIMESTAMP_UTC_FORMAT));
    let formatter = ArrayFormatter::try_new(plain.as_ref(), &options)?;
    Ok((0..plain.len())
        .map(|row| {
            plain
                .is_valid(row)
                .then(|| formatter.value(row).to_string())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    use arrow_array::{
        BooleanArray, Date32Array, Date64Array, Decimal128Array, DictionaryArray, Int8Array,
        Int64Array, StringArray, StringViewArray, TimestampMicrosecondArray,
        TimestampNanosecondArray, TimestampSecondArray, UInt64Array,
    };
    use proptest::prelude::*;

    /// The documented escape set, written out independently of the table.
    fn documented_set() -> Vec<u8> {
        let mut set: Vec<u8> = (0x00..=0x1F).collect();
        set.extend_from_slice(b"\"#%'*/:=?\\");
        set.push(0x7F);
        set.extend_from_slice(b"{[]^");
        set
    }

    fn texts(array: &dyn Array) -> Vec<Option<String>> {
        format_values(array).unwrap()
    }

    fn some(values: &[&str]) -> Vec<Option<String>> {
        values.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn numbers_booleans_and_strings() {
        assert_eq!(
            texts(&Int8Array::from(vec![i8::MIN, -1, 0, i8::MAX])),
            some(&["-128", "-1", "0", "127"])
        );
        assert_eq!(
            texts(&Int64Array::from(vec![Some(i64::MIN), None])),
            vec![Some(i64::MIN.to_string()), None]
        );
        assert_eq!(
            texts(&UInt64Array::from(vec![u64::MAX])),
            some(&["18446744073709551615"])
        );
        assert_eq!(
            texts(&BooleanArray::from(vec![Some(true), Some(false), None])),
            vec![Some("true".into()), Some("false".into()), None]
        );
        assert_eq!(
            texts(&StringArray::from(vec![Some("a/b"), Some(""), None])),
            vec![Some("a/b".into()), Some(String::new()), None]
        );
        assert_eq!(texts(&StringViewArray::from(vec!["café"])), some(&["café"]));
    }

    #[test]
    fn decimals_keep_their_scale() {
        let array = Decimal128Array::from(vec![Some(-1250), Some(5), Some(0), None])
            .with_precision_and_scale(10, 2)
            .unwrap();
        assert_eq!(
            texts(&array),
            vec![
                Some("-12.50".into()),
                Some("0.05".into()),
                Some("0.00".into()),
                None
            ]
        );
        let whole = Decimal128Array::from(vec![-1250])
            .with_precision_and_scale(10, 0)
            .unwrap();
        assert_eq!(texts(&whole), some(&["-1250"]));
    }

    #[test]
    fn dates_and_timestamps() {
        assert_eq!(
            texts(&Date32Array::from(vec![0, -1, 19782])),
            some(&["1970-01-01", "1969-12-31", "2024-02-29"])
        );
        assert_eq!(
            texts(&Date64Array::from(vec![-86_400_000])),
            some(&["1969-12-31"])
        );
        assert_eq!(
            texts(&TimestampSecondArray::from(vec![1_704_164_645, -1])),
            some(&["2024-01-02 03:04:05", "1969-12-31 23:59:59"])
        );
        assert_eq!(
            texts(&TimestampMicrosecondArray::from(vec![
                1_704_164_645_500_000
            ])),
            some(&["2024-01-02 03:04:05.500"])
        );
        assert_eq!(
            texts(&TimestampNanosecondArray::from(vec![-1])),
            some(&["1969-12-31 23:59:59.999999999"])
        );
        // A zoned timestamp: its instant's UTC wall clock, marked Z, whatever the zone.
        let zoned = TimestampSecondArray::from(vec![1_704_164_645]).with_timezone("+05:30");
        assert_eq!(texts(&zoned), some(&["2024-01-02 03:04:05Z"]));
        for zone in ["UTC", "America/New_York"] {
            let named = TimestampSecondArray::from(vec![1_704_164_645]).with_timezone(zone);
            assert_eq!(texts(&named), some(&["2024-01-02 03:04:05Z"]), "{zone}");
        }
    }

    #[test]
    fn dictionaries_give_their_values_and_other_types_are_refused() {
        let dictionary: DictionaryArray<arrow_array::types::Int16Type> =
            vec![Some("k/1"), None, Some("k/1"), Some("x")]
                .into_iter()
                .collect();
        assert_eq!(
            texts(&dictionary),
            vec![
                Some("k/1".into()),
                None,
                Some("k/1".into()),
                Some("x".into())
            ]
        );
        let floats = arrow_array::Float64Array::from(vec![1.5]);
        let error = format_values(&floats).unwrap_err().to_string();
        assert!(error.contains("Float64"), "{error}");
    }

    #[test]
    fn escape_set_is_exact_over_ascii() {
        let set = documented_set();
        assert_eq!(set.len(), 32 + 10 + 1 + 4);
        for b in 0u8..=0x7F {
            let c = char::from(b);
            let escaped = escape_path_name(&c.to_string());
            if set.contains(&b) {
                assert_eq!(
                    escaped,
                    format!("%{b:02X}"),
                    "char {b:#04x} must be escaped"
                );
            } else {
                assert_eq!(escaped, c.to_string(), "char {b:#04x} must stay");
            }
        }
    }

    #[test]
    fn escape_examples() {
        assert_eq!(escape_path_name(""), "");
        assert_eq!(escape_path_name("a/b=c"), "a%2Fb%3Dc");
        assert_eq!(escape_path_name("100%"), "100%25");
        assert_eq!(escape_path_name("a b+c"), "a b+c");
        assert_eq!(escape_path_name("12:30"), "12%3A30");
        assert_eq!(escape_path_name("\n\t\u{7f}"), "%0A%09%7F");
        assert_eq!(escape_path_name("{x}"), "%7Bx}");
    }

    #[test]
    fn non_ascii_is_not_escaped() {
        for s in [
            "café",
            "日本語",
            "\u{80}",
            "\u{FF}",
            "ÿ",
            "😀",
            "a\u{2028}b",
        ] {
            assert_eq!(escape_path_name(s), s);
        }
        assert_eq!(escape_path_name("é/ü"), "é%2Fü");
    }

    #[test]
    fn unescape_examples() {
        assert_eq!(unescape_path_name("a%2Fb%3dc"), "a/b=c");
        assert_eq!(unescape_path_name("%"), "%");
        assert_eq!(unescape_path_name("%4"), "%4");
        assert_eq!(unescape_path_name("50%"), "50%");
        assert_eq!(unescape_path_name("%zz%2"), "%zz%2");
        assert_eq!(unescape_path_name("%%41"), "%A");
        assert_eq!(unescape_path_name("%+A"), "%+A");
        assert_eq!(unescape_path_name("é%41é"), "éAé");
        // Byte-wise like Spark: %XX is the char U+00XX, not a UTF-8 byte.
        assert_eq!(unescape_path_name("%C3%A9"), "\u{C3}\u{A9}");
        assert_eq!(unescape_path_name("%00"), "\0");
    }

    #[test]
    fn segments() {
        assert_eq!(partition_segment("c", None), "c=__HIVE_DEFAULT_PARTITION__");
        assert_eq!(partition_segment("c", Some("")), "c=");
        assert_eq!(partition_segment("c", Some("a/b")), "c=a%2Fb");
        assert_eq!(partition_segment("a=b", Some("x")), "a%3Db=x");
    }

    proptest! {
        #[test]
        fn unescape_inverts_escape(s in any::<String>()) {
            prop_assert_eq!(unescape_path_name(&escape_path_name(&s)), s);
        }

        #[test]
        fn unescape_inverts_escape_ascii_heavy(s in "[\\x00-\\x7F%é😀]{0,24}") {
            prop_assert_eq!(unescape_path_name(&escape_path_name(&s)), s);
        }

        #[test]
        fn escaped_text_has_no_escapable_char_but_percent(s in any::<String>()) {
            let escaped = escape_path_name(&s);
            for c in escaped.chars() {
                prop_assert!(c == '%' || !needs_escape(c), "{:?} in {:?}", c, escaped);
            }
        }
    }
}
