//! The shuffle index reader on arbitrary bytes ([`partout_fuzz::shuffle_index`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partout_fuzz::shuffle_index(data));
