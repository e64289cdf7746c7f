//! Feeds arbitrary bytes to the request decoder as a connection would: frame after frame until the input ends or
//! a frame is rejected. Frame infos and collection prefixes of each decoded frame are parsed too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_mcbp::{decode_leb128, decode_request, RequestFrameInfos};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((req, used))) = decode_request(rest, 1 << 20) {
        let _ = RequestFrameInfos::parse(req.framing);
        let _ = decode_leb128(req.key);
        assert!(used >= 24 && used <= rest.len());
        rest = &rest[used..];
    }
});
