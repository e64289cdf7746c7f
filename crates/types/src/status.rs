//! Wire status codes. The table below is the one place a status is defined: its code, its name, the description and
//! the attributes that go into the error map (GET_ERROR_MAP), so the map always lists every status the server can
//! return.

/// An attribute of a status in the error map (kv_engine's docs/ErrorMap.md vocabulary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorAttr {
    Success,
    ItemOnly,
    InvalidInput,
    FetchConfig,
    ConnStateInvalidated,
    Auth,
    SpecialHandling,
    Support,
    Temp,
    Internal,
    RetryNow,
    RetryLater,
    Subdoc,
    ItemLocked,
    ItemDeleted,
    SystemConstraint,
    RateLimit,
}

impl ErrorAttr {
    pub fn name(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::ItemOnly => "item-only",
            Self::InvalidInput => "invalid-input",
            Self::FetchConfig => "fetch-config",
            Self::ConnStateInvalidated => "conn-state-invalidated",
            Self::Auth => "auth",
            Self::SpecialHandling => "special-handling",
            Self::Support => "support",
            Self::Temp => "temp",
            Self::Internal => "internal",
            Self::RetryNow => "retry-now",
            Self::RetryLater => "retry-later",
            Self::Subdoc => "subdoc",
            Self::ItemLocked => "item-locked",
            Self::ItemDeleted => "item-deleted",
            Self::SystemConstraint => "system-constraint",
            Self::RateLimit => "rate-limit",
        }
    }
}

macro_rules! statuses {
    ($( $variant:ident = $code:literal, $name:literal, $desc:literal, [$($attr:ident),*]; )*) => {
        /// A response status.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum Status {
            $( $variant = $code, )*
        }

        impl Status {
            /// Every status the server can return, in code order.
            pub const ALL: &'static [Status] = &[$( Status::$variant, )*];

            pub fn code(self) -> u16 {
                self as u16
            }
            pub fn from_code(code: u16) -> Option<Status> {
                match code {
                    $( $code => Some(Status::$variant), )*
                    _ => None,
                }
            }
            /// The name used in the error map (kv_engine's spelling).
            pub fn name(self) -> &'static str {
                match self { $( Status::$variant => $name, )* }
            }
            pub fn description(self) -> &'static str {
                match self { $( Status::$variant => $desc, )* }
            }
            pub fn attrs(self) -> &'static [ErrorAttr] {
                match self { $( Status::$variant => &[$(ErrorAttr::$attr),*], )* }
            }
        }
    };
}

statuses! {
    Success = 0x00, "SUCCESS", "Success", [Success];
    KeyEnoent = 0x01, "KEY_ENOENT", "Not Found", [ItemOnly];
    KeyEexists = 0x02, "KEY_EEXISTS", "key already exists, or CAS mismatch", [ItemOnly];
    E2big = 0x03, "E2BIG", "Value is too big", [InvalidInput];
    Einval = 0x04, "EINVAL", "Invalid packet", [InvalidInput];
    NotStored = 0x05, "NOT_STORED", "Not stored", [ItemOnly];
    DeltaBadval = 0x06, "DELTA_BADVAL", "Existing document is not a number", [ItemOnly, InvalidInput];
    NotMyVbucket = 0x07, "NOT_MY_VBUCKET", "Server does not know about this vBucket", [FetchConfig, InvalidInput];
    NoBucket = 0x08, "NO_BUCKET", "No bucket selected", [ConnStateInvalidated];
    Locked = 0x09, "LOCKED", "Requested resource is locked", [ItemLocked, ItemOnly, RetryLater];
    NotLocked = 0x0e, "NOT_LOCKED", "Requested resource is not locked", [ItemOnly];
    AuthError = 0x20, "AUTH_ERROR", "Authentication failed", [Auth];
    AuthContinue = 0x21, "AUTH_CONTINUE", "Authentication continues", [Auth, Support];
    Erange = 0x22, "ERANGE", "Range error", [InvalidInput];
    Rollback = 0x23, "ROLLBACK", "Rollback required", [SpecialHandling];
    Eaccess = 0x24, "EACCESS", "No access", [Support, Auth];
    NotInitialized = 0x25, "NOT_INITIALIZED", "The connection is not initialized", [ConnStateInvalidated, Support];
    RateLimitedNetworkIngress = 0x30, "RATE_LIMITED_NETWORK_INGRESS", "The user exceeded their network ingress limit", [RateLimit];
    RateLimitedNetworkEgress = 0x31, "RATE_LIMITED_NETWORK_EGRESS", "The user exceeded their network egress limit", [RateLimit];
    RateLimitedMaxConnections = 0x32, "RATE_LIMITED_MAX_CONNECTIONS", "The user exceeded their maximum number of connections", [RateLimit];
    RateLimitedMaxCommands = 0x33, "RATE_LIMITED_MAX_COMMANDS", "The user exceeded their maximum number of commands", [RateLimit];
    UnknownFrameInfo = 0x80, "UNKNOWN_FRAME_INFO", "Unknown frame info", [Support, InvalidInput];
    UnknownCommand = 0x81, "UNKNOWN_COMMAND", "Unknown command", [Support];
    Enomem = 0x82, "ENOMEM", "Out of memory", [Temp, RetryLater];
    NotSupported = 0x83, "NOT_SUPPORTED", "Operation not supported", [Support];
    Einternal = 0x84, "EINTERNAL", "Internal error", [Internal];
    Ebusy = 0x85, "EBUSY", "Server too busy", [Temp, RetryLater];
    Etmpfail = 0x86, "ETMPFAIL", "Temporary failure", [Temp, RetryLater];
    XattrEinval = 0x87, "XATTR_EINVAL", "Invalid XATTR section", [InvalidInput];
    UnknownCollection = 0x88, "UNKNOWN_COLLECTION", "Unknown collection", [InvalidInput, FetchConfig];
    UnknownScope = 0x8c, "UNKNOWN_SCOPE", "Unknown scope", [InvalidInput, FetchConfig];
    DurabilityInvalidLevel = 0xa0, "DURABILITY_INVALID_LEVEL", "Invalid durability level for this bucket", [InvalidInput];
    DurabilityImpossible = 0xa1, "DURABILITY_IMPOSSIBLE", "The durability level cannot be met with the current topology", [ItemOnly];
    SyncWriteInProgress = 0xa2, "SYNC_WRITE_IN_PROGRESS", "A synchronous write is in progress on this key", [Temp, ItemOnly, RetryLater];
    SyncWriteAmbiguous = 0xa3, "SYNC_WRITE_AMBIGUOUS", "The synchronous write may or may not have completed", [ItemOnly];
    SubdocPathEnoent = 0xc0, "SUBDOC_PATH_ENOENT", "Subdoc: Path not does not exist", [Subdoc, ItemOnly];
    SubdocPathMismatch = 0xc1, "SUBDOC_PATH_MISMATCH", "Subdoc: Path mismatch", [Subdoc, ItemOnly];
    SubdocPathEinval = 0xc2, "SUBDOC_PATH_EINVAL", "Subdoc: Invalid path", [Subdoc, InvalidInput];
    SubdocPathE2big = 0xc3, "SUBDOC_PATH_E2BIG", "Subdoc: Path too large", [Subdoc, InvalidInput];
    SubdocDocE2deep = 0xc4, "SUBDOC_DOC_E2DEEP", "Subdoc: Document too deep", [Subdoc, ItemOnly];
    SubdocValueCantinsert = 0xc5, "SUBDOC_VALUE_CANTINSERT", "Subdoc: Cannot insert specified value", [Subdoc, InvalidInput];
    SubdocDocNotjson = 0xc6, "SUBDOC_DOC_NOTJSON", "Subdoc: Existing document is not valid JSON", [Subdoc, ItemOnly];
    SubdocNumErange = 0xc7, "SUBDOC_NUM_ERANGE", "Subdoc: Existing number outside valid arithmetic range", [Subdoc, ItemOnly];
    SubdocDeltaEinval = 0xc8, "SUBDOC_DELTA_EINVAL", "Subdoc: Delta is 0, not a number, or outside the valid range", [Subdoc, InvalidInput];
    SubdocPathEexists = 0xc9, "SUBDOC_PATH_EEXISTS", "Subdoc: Document path already exists", [Subdoc, ItemOnly];
    SubdocValueEtoodeep = 0xca, "SUBDOC_VALUE_ETOODEEP", "Subdoc: Inserting the value would make the document too deep", [Subdoc, InvalidInput];
    SubdocInvalidCombo = 0xcb, "SUBDOC_INVALID_COMBO", "Subdoc: Invalid combination for multi-path command", [Subdoc, InvalidInput];
    SubdocMultiPathFailure = 0xcc, "SUBDOC_MULTI_PATH_FAILURE", "Subdoc: One or more paths in a multi-path command failed", [Subdoc];
    SubdocSuccessDeleted = 0xcd, "SUBDOC_SUCCESS_DELETED", "Subdoc: The operation completed successfully, but operated on a deleted document", [Subdoc, Success, ItemDeleted];
    SubdocXattrInvalidFlagCombo = 0xce, "SUBDOC_XATTR_INVALID_FLAG_COMBO", "Subdoc: Invalid combination of xattr flags", [Subdoc, InvalidInput];
    SubdocXattrInvalidKeyCombo = 0xcf, "SUBDOC_XATTR_INVALID_KEY_COMBO", "Subdoc: Invalid combination of xattr keys", [Subdoc, InvalidInput];
    SubdocXattrUnknownMacro = 0xd0, "SUBDOC_XATTR_UNKNOWN_MACRO", "Subdoc: Unknown xattr macro", [Subdoc, InvalidInput];
    SubdocXattrUnknownVattr = 0xd1, "SUBDOC_XATTR_UNKNOWN_VATTR", "Subdoc: Unknown virtual xattr", [Subdoc, InvalidInput];
    SubdocXattrCantModifyVattr = 0xd2, "SUBDOC_XATTR_CANT_MODIFY_VATTR", "Subdoc: Can't modify virtual xattr", [Subdoc, InvalidInput];
    SubdocMultiPathFailureDeleted = 0xd3, "SUBDOC_MULTI_PATH_FAILURE_DELETED", "Subdoc: One or more paths in a multi-path command failed on a deleted document", [Subdoc, ItemDeleted];
    SubdocInvalidXattrOrder = 0xd4, "SUBDOC_INVALID_XATTR_ORDER", "Subdoc: Invalid XATTR order (xattrs should come first)", [Subdoc, InvalidInput];
    SubdocXattrUnknownVattrMacro = 0xd5, "SUBDOC_XATTR_UNKNOWN_VATTR_MACRO", "Subdoc: The virtual xattr macro is unknown", [Subdoc, InvalidInput];
    SubdocCanOnlyReviveDeletedDocuments = 0xd6, "SUBDOC_CAN_ONLY_REVIVE_DELETED_DOCUMENTS", "Subdoc: Only deleted documents can be revived", [Subdoc, InvalidInput];
    SubdocDeletedDocumentCantHaveValue = 0xd7, "SUBDOC_DELETED_DOCUMENT_CANT_HAVE_VALUE", "Subdoc: A deleted document can't have a user value", [Subdoc, InvalidInput];
}

impl Status {
    pub fn is_success(self) -> bool {
        matches!(self, Status::Success | Status::SubdocSuccessDeleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every status round-trips through its code and has a name, a description and at least one attribute, which is
    /// what the C++ SDK requires of every error-map entry.
    #[test]
    fn every_status_is_complete_and_round_trips() {
        for s in Status::ALL {
            assert_eq!(Status::from_code(s.code()), Some(*s));
            assert!(!s.name().is_empty() && !s.description().is_empty() && !s.attrs().is_empty(), "{s:?}");
        }
        assert_eq!(Status::from_code(0x0a), None);
    }
}
