/// A synchronous-write durability level, as carried in the durability frame info.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DurabilityLevel {
    /// Held in memory on a majority of the configured copies.
    Majority = 1,
    /// Majority, and persisted on the active.
    MajorityAndPersistActive = 2,
    /// Persisted on a majority of the configured copies.
    PersistToMajority = 3,
}

impl DurabilityLevel {
    pub fn from_wire(b: u8) -> Option<DurabilityLevel> {
        match b {
            1 => Some(Self::Majority),
            2 => Some(Self::MajorityAndPersistActive),
            3 => Some(Self::PersistToMajority),
            _ => None,
        }
    }
    /// Whether the level needs the write on disk somewhere; ephemeral buckets refuse such levels.
    pub fn needs_persistence(self) -> bool {
        !matches!(self, Self::Majority)
    }
}
