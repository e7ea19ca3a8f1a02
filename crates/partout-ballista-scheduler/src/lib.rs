//! Ballista 55's scheduler (`ballista-scheduler` 55.0.0) with partout's fix for a lost
//! executor, compiled from Ballista's published source with
//! `patches/ballista-scheduler-55-executor-loss.patch` applied (by `build.rs`). Its API is
//! `ballista_scheduler`'s; what the patch changes, and why, is in `patches/README.md`:
//!
//! - a stage rolled back after a lost executor takes back the outputs it had handed to the
//!   stages reading it, so that they never read two attempts of one stage (rows twice);
//! - under push-staged scheduling, the task slots of cancelled and lost tasks are given back;
//! - when the adaptive planner would have to run a finished stage again (which it cannot),
//!   the job fails with an error saying so instead of waiting forever.
//!
//! The binary, `partout-ballista-scheduler`, is Ballista's `ballista-scheduler` with these
//! changes, and takes its flags.

// Ballista's code, as published: its lints are its own.
#![allow(warnings, clippy::all, clippy::pedantic, unexpected_cfgs, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/ballista-scheduler/src/lib.rs"));
