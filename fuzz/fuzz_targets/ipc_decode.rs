//! Arrow IPC stream decoding on arbitrary bytes, as partout reads a destination's stream back.
//! Errors are fine; panics, stack overflows, hangs and huge allocations are findings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use partout_format::ipc::decode_stream;

fuzz_target!(|data: &[u8]| {
    let _ = decode_stream(data);
});
