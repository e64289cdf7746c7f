use settee_types::Status;

/// Every way a KV operation can fail. The wire status comes from [`EngineError::status`] alone.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("document not found")]
    NotFound,
    #[error("document exists")]
    Exists,
    #[error("CAS mismatch")]
    CasMismatch,
    #[error("not stored")]
    NotStored,
    #[error("document is locked")]
    Locked,
    #[error("document is not locked")]
    NotLocked,
    #[error("value too large")]
    TooBig,
    #[error("invalid arguments: {0}")]
    Invalid(&'static str),
    #[error("existing value is not a number")]
    DeltaBadval,
    #[error("vBucket is not active on this node")]
    NotMyVbucket,
    #[error("unknown collection")]
    UnknownCollection { manifest_uid: u64 },
    #[error("unknown scope")]
    UnknownScope { manifest_uid: u64 },
    #[error("durability level not supported by this bucket")]
    DurabilityInvalidLevel,
    #[error("durability impossible with the current topology")]
    DurabilityImpossible,
    #[error("a synchronous write is in progress on this key")]
    SyncWriteInProgress,
    #[error("bucket memory quota exhausted")]
    OutOfMemory,
    #[error("temporary failure (warming up, memory full or disk failed)")]
    TempFail,
    /// The vBucket was taken out of service (its stored data failed a checksum).
    #[error("vBucket out of service after a checksum mismatch")]
    VbucketFailed,
    /// The item (or its value) is on disk only: fetch it in the background, then retry the operation.
    #[error("item is not resident")]
    NeedFetch,
    #[error("the durable write may or may not have been persisted")]
    SyncWriteAmbiguous,
    #[error("sub-document request failed: {0:?}")]
    Subdoc(Status),
    #[error("sub-document spec {index} failed: {status:?}")]
    SubdocSpec { index: u8, status: Status },
}

impl EngineError {
    pub fn status(&self) -> Status {
        match self {
            EngineError::NotFound => Status::KeyEnoent,
            EngineError::Exists | EngineError::CasMismatch => Status::KeyEexists,
            EngineError::NotStored => Status::NotStored,
            EngineError::Locked => Status::Locked,
            EngineError::NotLocked => Status::NotLocked,
            EngineError::TooBig => Status::E2big,
            EngineError::Invalid(_) => Status::Einval,
            EngineError::DeltaBadval => Status::DeltaBadval,
            EngineError::NotMyVbucket => Status::NotMyVbucket,
            EngineError::UnknownCollection { .. } => Status::UnknownCollection,
            EngineError::UnknownScope { .. } => Status::UnknownScope,
            EngineError::DurabilityInvalidLevel => Status::DurabilityInvalidLevel,
            EngineError::DurabilityImpossible => Status::DurabilityImpossible,
            EngineError::SyncWriteInProgress => Status::SyncWriteInProgress,
            EngineError::OutOfMemory => Status::Enomem,
            EngineError::TempFail | EngineError::NeedFetch => Status::Etmpfail,
            EngineError::VbucketFailed => Status::Einternal,
            EngineError::SyncWriteAmbiguous => Status::SyncWriteAmbiguous,
            EngineError::Subdoc(s) => *s,
            EngineError::SubdocSpec { .. } => Status::SubdocMultiPathFailure,
        }
    }
}
