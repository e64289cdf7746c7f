//! Sub-document paths and lookups on arbitrary input never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_doc::{lookup, parse_path, DocMeta, LookupSpec};

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len().saturating_sub(1));
    let (path, doc) = data.get(1..).unwrap_or(&[]).split_at(split.min(data.len().saturating_sub(1)));
    let _ = parse_path(path);
    let spec = [LookupSpec { opcode: 0xc5, flags: 0, path }];
    let _ = lookup(doc, false, &DocMeta::default(), &spec, 0);
});
