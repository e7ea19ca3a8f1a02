//! The Presto page walk on arbitrary bytes ([`partout_fuzz::presto_inspect`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partout_fuzz::presto_inspect(data));
