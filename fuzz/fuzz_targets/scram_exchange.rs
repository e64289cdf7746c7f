//! SASL SCRAM exchanges (client-first, client-final) on arbitrary bytes never panic, and arbitrary proofs never authenticate.
//!
//! The property lives in `settee_server::fuzzing`, which also replays `fuzz/seeds/scram_exchange/` in the ordinary tests.
//! Run: `cargo +nightly fuzz run scram_exchange fuzz/seeds/scram_exchange` (or `scripts/fuzz.sh`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| settee_server::fuzzing::scram_exchange(data));
