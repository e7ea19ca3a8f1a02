//! Presto page decoding on arbitrary bytes ([`partout_fuzz::presto_decode`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partout_fuzz::presto_decode(data));
