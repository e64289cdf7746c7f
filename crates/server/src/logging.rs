//! The process's log: tracing to stderr, as text (the default) or one JSON object per line (`--log-format json`,
//! for log shippers), filtered by `SETTEE_LOG` at start (default `info,openraft=error`) and changeable while the node
//! runs through `GET/POST /settings/logLevel` (`filter=info,settee_server::kv=debug`: tracing's directive syntax,
//! one level per component).

use std::sync::{Mutex, OnceLock};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter};

/// The filter a node starts with when `SETTEE_LOG` is not set.
pub const DEFAULT_FILTER: &str = "info,openraft=error";

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Replaces the process's filter; set once by [`init`].
type Reloader = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

static RELOAD: OnceLock<Reloader> = OnceLock::new();
static CURRENT: Mutex<String> = Mutex::new(String::new());

/// Why a filter cannot be set.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FilterError {
    #[error("invalid filter {0:?}: {1}")]
    Invalid(String, String),
    #[error("this process's log is not managed by settee (an embedded or test node)")]
    NotManaged,
    #[error("the log filter could not be replaced: {0}")]
    Reload(String),
}

/// Installs the process's subscriber (once, at start, by the `settee` binary).
pub fn init(format: LogFormat) {
    let spec = std::env::var("SETTEE_LOG").ok().filter(|s| EnvFilter::try_new(s).is_ok());
    let spec = spec.unwrap_or_else(|| DEFAULT_FILTER.to_owned());
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&spec));
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry.with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr)).init(),
        LogFormat::Json => registry.with(tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr)).init(),
    }
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = spec;
    let _ = RELOAD.set(Box::new(move |f| handle.reload(f).map_err(|e| e.to_string())));
}

/// The filter in force, if settee manages this process's log.
pub fn current_filter() -> Option<String> {
    RELOAD.get().map(|_| CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone())
}

/// Replaces the filter in force with `spec` (validated first; an invalid one changes nothing).
pub fn set_filter(spec: &str) -> Result<(), FilterError> {
    let filter = EnvFilter::try_new(spec).map_err(|e| FilterError::Invalid(spec.to_owned(), e.to_string()))?;
    let reload = RELOAD.get().ok_or(FilterError::NotManaged)?;
    reload(filter).map_err(FilterError::Reload)?;
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = spec.to_owned();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An invalid filter is refused before anything changes; a process whose log settee did not set up says so.
    #[test]
    fn filters_are_validated_and_need_a_managed_log() {
        assert!(matches!(set_filter("info,=[broken"), Err(FilterError::Invalid(..))));
        assert_eq!(set_filter("warn"), Err(FilterError::NotManaged));
        assert_eq!(current_filter(), None);
    }
}
