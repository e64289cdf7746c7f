//! Request frame infos (the framing extras of magic 0x08): a 1-byte header `(id << 4) | len`, where a nibble of 15
//! escapes to one more byte (15 + next byte), for the id and the length alike.

use settee_types::DurabilityLevel;

/// The frame infos of one request that settee acts on. Unknown ids are skipped, as the protocol allows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestFrameInfos {
    /// Durability level and the optional timeout in milliseconds.
    pub durability: Option<(DurabilityLevel, Option<u16>)>,
    pub preserve_ttl: bool,
    /// The barrier frame: with unordered execution, this request must wait until every earlier one finished.
    pub barrier: bool,
}

/// A frame-info section that cannot be used; the request gets EINVAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameInfoError {
    /// The section ends inside a frame info.
    Truncated,
    /// A durability frame with a bad level or length, or a timeout of 0 or 0xffff.
    BadDurability,
    /// A preserve-TTL frame with a payload.
    BadPreserveTtl,
}

const ID_BARRIER: usize = 0;
const ID_DURABILITY: usize = 1;
const ID_PRESERVE_TTL: usize = 5;

impl RequestFrameInfos {
    pub fn parse(mut section: &[u8]) -> Result<RequestFrameInfos, FrameInfoError> {
        let mut out = RequestFrameInfos::default();
        while let Some((&first, rest)) = section.split_first() {
            section = rest;
            let id = take_nibble(first >> 4, &mut section)?;
            let len = take_nibble(first & 0x0f, &mut section)?;
            let payload = section.get(..len).ok_or(FrameInfoError::Truncated)?;
            section = &section[len..];
            match id {
                ID_BARRIER if len == 0 => out.barrier = true,
                ID_DURABILITY => out.durability = Some(parse_durability(payload)?),
                ID_PRESERVE_TTL if len == 0 => out.preserve_ttl = true,
                ID_PRESERVE_TTL => return Err(FrameInfoError::BadPreserveTtl),
                _ => {}
            }
        }
        Ok(out)
    }
}

fn take_nibble(nibble: u8, section: &mut &[u8]) -> Result<usize, FrameInfoError> {
    if nibble < 15 {
        return Ok(usize::from(nibble));
    }
    let (&extra, rest) = section.split_first().ok_or(FrameInfoError::Truncated)?;
    *section = rest;
    Ok(15 + usize::from(extra))
}

fn parse_durability(p: &[u8]) -> Result<(DurabilityLevel, Option<u16>), FrameInfoError> {
    let level = p.first().and_then(|b| DurabilityLevel::from_wire(*b)).ok_or(FrameInfoError::BadDurability)?;
    match p.len() {
        1 => Ok((level, None)),
        3 => match u16::from_be_bytes([p[1], p[2]]) {
            0 | 0xffff => Err(FrameInfoError::BadDurability),
            ms => Ok((level, Some(ms))),
        },
        _ => Err(FrameInfoError::BadDurability),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames captured from the C++ client (PROTOCOL.md §5.1) parse to what they mean.
    #[test]
    fn captured_frames_parse() {
        let f = RequestFrameInfos::parse(&[0x13, 0x01, 0x0a, 0x8c]).unwrap();
        assert_eq!(f.durability, Some((DurabilityLevel::Majority, Some(2700))));
        assert!(!f.preserve_ttl);
        let f = RequestFrameInfos::parse(&[0x50]).unwrap();
        assert!(f.preserve_ttl && f.durability.is_none() && !f.barrier);
        assert!(RequestFrameInfos::parse(&[0x00]).unwrap().barrier);
        let f = RequestFrameInfos::parse(&[0x50, 0x11, 0x03]).unwrap();
        assert_eq!(f.durability, Some((DurabilityLevel::PersistToMajority, None)));
    }

    /// Unknown ids are skipped, escaped ids and lengths are honoured.
    #[test]
    fn unknown_and_escaped_frames_are_skipped() {
        // id 2 (stream id) with 2 bytes, then id 15+1=16 escaped with length 1, then preserve TTL.
        let f = RequestFrameInfos::parse(&[0x22, 0xAA, 0xBB, 0xF1, 0x01, 0x7F, 0x50]).unwrap();
        assert!(f.preserve_ttl);
    }

    /// Bad durability payloads and truncated sections are errors, never panics.
    #[test]
    fn bad_frames_are_errors() {
        assert_eq!(RequestFrameInfos::parse(&[0x11, 0x04]), Err(FrameInfoError::BadDurability));
        assert_eq!(RequestFrameInfos::parse(&[0x13, 0x01, 0x00, 0x00]), Err(FrameInfoError::BadDurability));
        assert_eq!(RequestFrameInfos::parse(&[0x13, 0x01, 0xff, 0xff]), Err(FrameInfoError::BadDurability));
        assert_eq!(RequestFrameInfos::parse(&[0x12, 0x01, 0x00]), Err(FrameInfoError::BadDurability));
        assert_eq!(RequestFrameInfos::parse(&[0x13, 0x01]), Err(FrameInfoError::Truncated));
        assert_eq!(RequestFrameInfos::parse(&[0xF0]), Err(FrameInfoError::Truncated));
        assert_eq!(RequestFrameInfos::parse(&[0x51, 0x00]), Err(FrameInfoError::BadPreserveTtl));
    }
}
