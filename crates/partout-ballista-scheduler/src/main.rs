//! `partout-ballista-scheduler`: Ballista 55's scheduler binary, with its flags, on the
//! patched scheduler of this crate's library.

#![allow(warnings, clippy::all, clippy::pedantic, unexpected_cfgs)]

include!(concat!(
    env!("OUT_DIR"),
    "/ballista-scheduler/src/bin/main.rs"
));
