/// Every frame starts with a 24-byte header.
pub const HEADER_BYTES: usize = 24;

/// The first byte of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Magic {
    /// Client request, classic framing.
    ClientRequest = 0x80,
    /// Client request with framing extras (flexible framing).
    AltClientRequest = 0x08,
    /// Server response, classic framing.
    ClientResponse = 0x81,
    /// Server response with framing extras.
    AltClientResponse = 0x18,
    /// Server-initiated request (cluster map change notification).
    ServerRequest = 0x82,
    /// A client's reply to a server request.
    ServerResponse = 0x83,
}

impl Magic {
    pub fn from_byte(b: u8) -> Option<Magic> {
        match b {
            0x80 => Some(Magic::ClientRequest),
            0x08 => Some(Magic::AltClientRequest),
            0x81 => Some(Magic::ClientResponse),
            0x18 => Some(Magic::AltClientResponse),
            0x82 => Some(Magic::ServerRequest),
            0x83 => Some(Magic::ServerResponse),
            _ => None,
        }
    }
    /// Whether bytes 2-3 hold a one-byte framing-extras length and a one-byte key length.
    pub fn is_flexible(self) -> bool {
        matches!(self, Magic::AltClientRequest | Magic::AltClientResponse)
    }
}

pub(crate) fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
pub(crate) fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
pub(crate) fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// The lengths in a header, already split for classic or flexible framing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lengths {
    pub framing: usize,
    pub extras: usize,
    pub key: usize,
    pub body: usize,
}

impl Lengths {
    /// Reads the lengths from a complete 24-byte header.
    pub(crate) fn read(h: &[u8], magic: Magic) -> Lengths {
        let (framing, key) =
            if magic.is_flexible() { (usize::from(h[2]), usize::from(h[3])) } else { (0, usize::from(read_u16(h, 2))) };
        Lengths { framing, extras: usize::from(h[4]), key, body: read_u32(h, 8) as usize }
    }
    /// The value length, or None when the parts do not fit in the body.
    pub(crate) fn value(&self) -> Option<usize> {
        self.body.checked_sub(self.framing + self.extras + self.key)
    }
}
