//! The security settings' parsers (clientCertAuth JSON, /settings/security and passwordPolicy forms) never panic and round-trip what they accept.
//!
//! The property lives in `settee_server::fuzzing`, which also replays `fuzz/seeds/security_settings/` in the ordinary tests.
//! Run: `cargo +nightly fuzz run security_settings fuzz/seeds/security_settings` (or `scripts/fuzz.sh`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| settee_server::fuzzing::security_settings(data));
