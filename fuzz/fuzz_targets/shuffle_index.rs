//! The shuffle index reader on arbitrary bytes: the first 8 bytes are the data file's length
//! (little-endian), the rest is the index. Errors are fine (they must name the index); an index
//! that parses must describe ranges that fit the data file, in order, without overlap, each of
//! a listed destination. Panics, hangs and huge allocations are findings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use partout_io::{IoError, parse_shuffle_index};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Some((data_len, index)) = data.split_first_chunk::<8>() else {
        return;
    };
    let data_len = u64::from_le_bytes(*data_len);
    let path = Path::new("fuzz.index");
    match parse_shuffle_index(path, index, data_len) {
        Ok((destinations, ranges)) => {
            let mut end = 0u64;
            for range in &ranges {
                assert!(range.destination < destinations, "{range:?}");
                assert!(range.offset >= end, "{range:?} overlaps the range before");
                end = range.offset + range.len;
                assert!(end <= data_len, "{range:?} passes {data_len} bytes");
            }
            assert_eq!(index.len(), 20 + 28 * ranges.len());
        }
        Err(IoError::File { path: named, .. }) => assert_eq!(named, path),
        Err(e) => panic!("an error not naming the index: {e}"),
    }
});
