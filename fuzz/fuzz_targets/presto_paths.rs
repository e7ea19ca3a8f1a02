//! Presto exchange requests on arbitrary bytes ([`flight::presto_paths`]).
#![no_main]

#[path = "../src/flight.rs"]
#[allow(dead_code)]
mod flight;

libfuzzer_sys::fuzz_target!(|data: &[u8]| flight::presto_paths(data));
