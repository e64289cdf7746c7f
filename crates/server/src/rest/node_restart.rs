//! `POST /settee/node/restart`, settee-only, for rolling restarts and upgrades (`settee cluster rolling-restart`):
//! the node answers 202, stops cleanly (connections closed, every bucket flushed, the metadata store shut down)
//! and re-executes itself with the same arguments, keeping its data directory. Form field `binary` (optional): the
//! executable to run instead, which must sit in the same directory as the running one (an upgrade drops the new
//! binary beside the old; nothing elsewhere on the machine can be run this way). Without it the node runs the path
//! it started from, which is the new version when a package replaced the binary in place.

use std::path::{Path, PathBuf};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;
use crate::node::RestartRequest;

pub(crate) async fn restart(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    caller.require(caller.user.is_admin(), || "cluster.admin!write".to_owned())?;
    if !state.node.restartable.load(std::sync::atomic::Ordering::Acquire) {
        let why = "This node is embedded in another program and cannot restart itself.";
        return Err(RestError::global(StatusCode::NOT_IMPLEMENTED, why));
    }
    let form = Form::parse(&body);
    let running = state.node.executable.clone().ok_or_else(|| {
        RestError::global(StatusCode::INTERNAL_SERVER_ERROR, "This node cannot tell which executable it runs.")
    })?;
    let binary = match form.get("binary").filter(|b| !b.is_empty()) {
        None => running,
        Some(b) => beside(&running, Path::new(b)).map_err(|e| RestError::field("binary", e))?,
    };
    if state.node.restart.send_replace(Some(RestartRequest { binary: binary.clone() })).is_some() {
        return Err(RestError::global(StatusCode::CONFLICT, "A restart is already under way."));
    }
    tracing::warn!(binary = %binary.display(), "restart requested over REST");
    Ok(StatusCode::ACCEPTED)
}

/// `candidate` if it is an executable file in the directory of `running`; why not otherwise.
fn beside(running: &Path, candidate: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let canonical = candidate.canonicalize().map_err(|e| format!("{}: {e}", candidate.display()))?;
    let dir = running.parent().and_then(|d| d.canonicalize().ok());
    if canonical.parent() != dir.as_deref() {
        return Err(format!("The binary must be in the directory of the running one ({})", running.display()));
    }
    let meta = std::fs::metadata(&canonical).map_err(|e| format!("{}: {e}", canonical.display()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("{} is not an executable file", canonical.display()));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only an executable file beside the running binary may replace it.
    #[test]
    fn only_an_executable_beside_the_running_binary_is_accepted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch_dir();
        let running = dir.join("settee");
        let next = dir.join("settee-next");
        let plain = dir.join("notes.txt");
        for f in [&running, &next, &plain] {
            std::fs::write(f, b"#!/bin/sh\n").unwrap();
        }
        for f in [&running, &next] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert_eq!(beside(&running, &next), Ok(next.canonicalize().unwrap()));
        assert!(beside(&running, &plain).unwrap_err().contains("not an executable"));
        assert!(beside(&running, Path::new("/bin/sh")).unwrap_err().contains("directory of the running one"));
        assert!(beside(&running, &dir.join("absent")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A node embedded in a test (no main loop to act on a restart) refuses the request instead of a 202.
    #[tokio::test]
    async fn an_embedded_node_refuses_to_restart() {
        let app = crate::rest::testing::TestApp::new();
        let admin = Some(crate::rest::testing::ADMIN);
        let reply = app.call("POST", "/settee/node/restart", admin, Some("")).await;
        assert_eq!(reply.status, StatusCode::NOT_IMPLEMENTED, "{}", reply.text);
        assert_eq!(*app.state.node.restart.borrow(), None, "nothing was asked of the node");
    }

    fn scratch_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("settee-restart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
