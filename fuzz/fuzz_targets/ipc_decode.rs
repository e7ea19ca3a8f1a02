//! Arrow IPC stream decoding on arbitrary bytes ([`partout_fuzz::ipc_decode`]).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partout_fuzz::ipc_decode(data));
