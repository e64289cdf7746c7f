//! `config` (create a repository) and `remove` (a repository, or one backup of it).

use std::path::Path;

use crate::error::BackupError;
use crate::layout::{check_name, repo_dir, write_json, RepoMeta, FORMAT_VERSION, REPO_META};

pub(crate) fn config(archive: &Path, repo: &str) -> Result<(), BackupError> {
    check_name("repository", repo)?;
    let dir = repo_dir(archive, repo);
    if dir.join(REPO_META).exists() {
        return Err(BackupError::Usage(format!("repository `{repo}` already exists in {}", archive.display())));
    }
    std::fs::create_dir_all(&dir).map_err(BackupError::file(&dir))?;
    write_json(&dir.join(REPO_META), &RepoMeta { version: FORMAT_VERSION, name: repo.to_string() })
}

/// Opens an existing repository: its directory, after checking its metadata file.
pub(crate) fn open(archive: &Path, repo: &str) -> Result<std::path::PathBuf, BackupError> {
    check_name("repository", repo)?;
    let dir = repo_dir(archive, repo);
    if !dir.join(REPO_META).exists() {
        return Err(BackupError::Usage(format!(
            "no repository `{repo}` in {} (create it with `settee backup config`)",
            archive.display()
        )));
    }
    let meta: RepoMeta = crate::layout::read_json(&dir.join(REPO_META))?;
    if meta.version != FORMAT_VERSION {
        return Err(BackupError::Usage(format!("repository format {} is not supported", meta.version)));
    }
    Ok(dir)
}

pub(crate) fn remove(archive: &Path, repo: &str, backup: Option<&str>) -> Result<(), BackupError> {
    let dir = open(archive, repo)?;
    match backup {
        None => {
            std::fs::remove_dir_all(&dir).map_err(BackupError::file(&dir))?;
            println!("Backup repository `{repo}` deleted successfully from archive `{}`", archive.display());
        }
        Some(name) => {
            check_name("backup", name)?;
            let b = dir.join(name);
            if !b.is_dir() {
                return Err(BackupError::Usage(format!("no backup `{name}` in repository `{repo}`")));
            }
            std::fs::remove_dir_all(&b).map_err(BackupError::file(&b))?;
            println!("Backup `{name}` deleted from repository `{repo}`");
        }
    }
    Ok(())
}
