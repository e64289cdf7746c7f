//! The REST form parser never panics, and what it reads survives being written and read again.
//!
//! The property lives in `settee_server::fuzzing`, which also replays `fuzz/seeds/rest_form/` in the ordinary tests.
//! Run: `cargo +nightly fuzz run rest_form fuzz/seeds/rest_form` (or `scripts/fuzz.sh`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| settee_server::fuzzing::rest_form(data));
