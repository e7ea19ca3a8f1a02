//! Flight tickets and action bodies on arbitrary bytes ([`flight::flight_requests`]).
#![no_main]

#[path = "../src/flight.rs"]
#[allow(dead_code)]
mod flight;

libfuzzer_sys::fuzz_target!(|data: &[u8]| flight::flight_requests(data));
