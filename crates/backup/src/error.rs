//! Every way a backup command fails; the binary prints the message and exits non-zero.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Usage(String),
    #[error("archive damaged: {0}")]
    Damaged(String),
    #[error("cluster: {0}")]
    Cluster(String),
    #[error("kv: {0}")]
    Kv(#[from] settee_client::ClientError),
    #[error("dcp: {0}")]
    Dcp(String),
}

impl BackupError {
    pub(crate) fn file(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> BackupError {
        let path = path.into();
        move |source| BackupError::File { path, source }
    }
}
