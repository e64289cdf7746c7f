/// The datatype byte of a frame: a set of bits describing the value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Datatype(pub u8);

impl Datatype {
    pub const RAW: Datatype = Datatype(0);
    pub const JSON: Datatype = Datatype(0x01);
    pub const SNAPPY: Datatype = Datatype(0x02);
    pub const XATTR: Datatype = Datatype(0x04);
    /// Every bit the protocol defines; anything else in a request is invalid.
    pub const ALL: Datatype = Datatype(0x07);

    /// The datatype of a stored value: JSON when the body is JSON, XATTR when it carries an xattr section.
    pub fn of(json: bool, xattr: bool) -> Datatype {
        Datatype(if json { Self::JSON.0 } else { 0 } | if xattr { Self::XATTR.0 } else { 0 })
    }
    pub fn contains(self, other: Datatype) -> bool {
        self.0 & other.0 == other.0
    }
    pub fn with(self, other: Datatype) -> Datatype {
        Datatype(self.0 | other.0)
    }
    pub fn without(self, other: Datatype) -> Datatype {
        Datatype(self.0 & !other.0)
    }
    pub fn is_json(self) -> bool {
        self.contains(Self::JSON)
    }
    pub fn is_snappy(self) -> bool {
        self.contains(Self::SNAPPY)
    }
    pub fn has_xattr(self) -> bool {
        self.contains(Self::XATTR)
    }
}
