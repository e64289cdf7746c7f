//! Small whole-file writes that survive a crash: a temporary file, fsync, rename over the target, fsync of the
//! directory. A reader sees the old content or the new one, never a mix. Blocking: call from a blocking thread.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use serde::de::DeserializeOwned;

use super::error::OpenError;

/// Replaces `path` with `bytes` so that a crash leaves the old content or the new, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_parent(path)
}

/// Makes a rename or a new file in `path`'s directory durable.
pub(crate) fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => File::open(".")?.sync_all(),
    }
}

/// Reads a JSON file written by [`write_atomic`]; a missing file is `None`.
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, OpenError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(OpenError::Io { path: path.into(), source }),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| OpenError::Corrupt { path: path.into(), reason: e.to_string() })
}
