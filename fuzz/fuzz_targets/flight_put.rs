//! A producer's DoPut messages on arbitrary bytes ([`flight::flight_put`]): errors are fine.
#![no_main]

#[path = "../src/flight.rs"]
#[allow(dead_code)]
mod flight;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = flight::flight_put(data);
});
