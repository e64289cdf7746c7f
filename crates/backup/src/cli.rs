//! The command line, with cbbackupmgr's names for commands and flags (`-a/--archive`, `-r/--repo`, `-c/--cluster`,
//! `-u/--username`, `-p/--password`, `--start`, `--end`, `--map-data`, `--force-updates`, `--json`).

use std::path::PathBuf;

use crate::error::BackupError;

#[derive(clap::Args, Debug, Clone)]
pub struct BackupCommand {
    #[command(subcommand)]
    pub command: Subcommand,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum Subcommand {
    /// Create a backup repository in an archive (the archive directory is created if needed).
    Config(RepoArgs),
    /// Back up every bucket of a cluster into a repository: the first backup is full, later ones incremental.
    Backup(BackupArgs),
    /// Restore backups of a repository into a cluster with SET_WITH_META / DEL_WITH_META.
    Restore(RestoreArgs),
    /// List the repositories and backups of an archive, checking every file's checksum.
    Info(InfoArgs),
    /// Fold a range of backups into one, named after the last (`--start` to `--end`).
    Merge(MergeArgs),
    /// Remove a repository, or one backup of it (`--backups NAME`).
    Remove(RemoveArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct MergeArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// The first backup to merge.
    #[arg(long)]
    pub start: String,
    /// The last backup to merge; the merged backup takes its name.
    #[arg(long)]
    pub end: String,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RepoArgs {
    /// The archive directory.
    #[arg(short = 'a', long)]
    pub archive: PathBuf,
    /// The repository's name.
    #[arg(short = 'r', long)]
    pub repo: String,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// The cluster's management address, `http://HOST:PORT` (or `HOST:PORT`).
    #[arg(short = 'c', long)]
    pub cluster: String,
    #[arg(short = 'u', long)]
    pub username: String,
    #[arg(short = 'p', long)]
    pub password: String,
}

#[derive(clap::Args, Debug, Clone)]
pub struct BackupArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Only these buckets (comma-separated); all buckets when absent.
    #[arg(long, value_delimiter = ',')]
    pub include_data: Vec<String>,
    /// Do not back up the buckets' GSI index definitions.
    #[arg(long)]
    pub disable_gsi_indexes: bool,
    /// Also back up the cluster's local users (roles, groups, password hashes) and groups.
    #[arg(long)]
    pub enable_users: bool,
    /// Print no progress lines.
    #[arg(long)]
    pub no_progress_bar: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The first backup to restore (a backup name); the repository's first when absent.
    #[arg(long)]
    pub start: Option<String>,
    /// The last backup to restore (a backup name); the repository's last when absent.
    #[arg(long)]
    pub end: Option<String>,
    /// Restore data elsewhere: `src=dst` pairs, comma-separated, each a bucket, `bucket.scope` or
    /// `bucket.scope.collection` (both sides of the same depth).
    #[arg(long, value_delimiter = ',')]
    pub map_data: Vec<String>,
    /// Overwrite documents even when the cluster holds a newer version (no conflict resolution).
    #[arg(long)]
    pub force_updates: bool,
    /// Create a target bucket that does not exist, with the settings its backup saved.
    #[arg(long)]
    pub auto_create_buckets: bool,
    /// Do not restore GSI index definitions.
    #[arg(long)]
    pub disable_gsi_indexes: bool,
    /// Restore the users and groups the backup saved (`backup --enable-users`); existing ones are left alone.
    #[arg(long)]
    pub enable_users: bool,
    /// With --enable-users: replace existing users and groups with the backup's.
    #[arg(long)]
    pub overwrite_users: bool,
    /// Print no progress lines.
    #[arg(long)]
    pub no_progress_bar: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct InfoArgs {
    #[arg(short = 'a', long)]
    pub archive: PathBuf,
    /// Only this repository.
    #[arg(short = 'r', long)]
    pub repo: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RemoveArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Remove only this backup (its name); the whole repository when absent.
    #[arg(long)]
    pub backups: Option<String>,
}

pub(crate) async fn dispatch(cmd: BackupCommand) -> Result<(), BackupError> {
    match cmd.command {
        Subcommand::Config(a) => {
            crate::repo::config(&a.archive, &a.repo)?;
            println!("Backup repository `{}` created successfully in archive `{}`", a.repo, a.archive.display());
            Ok(())
        }
        Subcommand::Backup(a) => crate::backup::run(&a).await,
        Subcommand::Restore(a) => crate::restore::run(&a).await,
        Subcommand::Info(a) => crate::info::run(&a),
        Subcommand::Merge(a) => crate::merge::run(&a.repo.archive, &a.repo.repo, &a.start, &a.end),
        Subcommand::Remove(a) => crate::repo::remove(&a.repo.archive, &a.repo.repo, a.backups.as_deref()),
    }
}
