//! What `/metrics` reports about the process and its host, read from Linux's `/proc` at scrape time: the process's
//! CPU seconds (`/proc/self/stat`), its resident memory (`/proc/self/status`) and the host's CPU seconds by mode
//! (`/proc/stat`). Each reader returns a typed error on text it cannot parse (or on a system without `/proc`); the
//! scrape then leaves those metrics out and logs why, rather than failing.

/// Clock ticks per second in `/proc` times: Linux's USER_HZ, which the kernel fixes at 100 for the values it shows
/// to user space on every architecture settee builds for.
const USER_HZ: f64 = 100.0;

/// Why a `/proc` file could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProcError {
    #[error("cannot read {path}: {source}")]
    Read { path: &'static str, source: std::io::Error },
    #[error("{path} has no parsable {field}")]
    Malformed { path: &'static str, field: &'static str },
}

/// The process's CPU time, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ProcessCpu {
    pub(crate) user: f64,
    pub(crate) sys: f64,
}

/// The host's CPU time summed over its CPUs, in seconds, by mode (the first line of `/proc/stat`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostCpu(pub(crate) Vec<(&'static str, f64)>);

fn read(path: &'static str) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|source| ProcError::Read { path, source })
}

/// This process's user and system CPU seconds.
pub(crate) fn process_cpu() -> Result<ProcessCpu, ProcError> {
    parse_process_cpu(&read("/proc/self/stat")?)
}

/// This process's resident set size in bytes.
pub(crate) fn process_resident_bytes() -> Result<u64, ProcError> {
    parse_resident_bytes(&read("/proc/self/status")?)
}

/// The host's CPU seconds by mode.
pub(crate) fn host_cpu() -> Result<HostCpu, ProcError> {
    parse_host_cpu(&read("/proc/stat")?)
}

/// `/proc/self/stat`: `pid (comm) state ...`; utime and stime are the 14th and 15th fields. The command name may
/// hold spaces and parentheses, so fields are counted after the last `)`.
fn parse_process_cpu(text: &str) -> Result<ProcessCpu, ProcError> {
    const PATH: &str = "/proc/self/stat";
    let after =
        text.rsplit_once(')').map(|(_, rest)| rest).ok_or(ProcError::Malformed { path: PATH, field: "comm" })?;
    // After the comm come field 3 (state) onwards: utime is field 14, so index 11 here; stime index 12.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize, field: &'static str| {
        fields.get(i).and_then(|f| f.parse::<u64>().ok()).ok_or(ProcError::Malformed { path: PATH, field })
    };
    Ok(ProcessCpu { user: ticks(11, "utime")? as f64 / USER_HZ, sys: ticks(12, "stime")? as f64 / USER_HZ })
}

/// `/proc/self/status`: the `VmRSS:   1234 kB` line.
fn parse_resident_bytes(text: &str) -> Result<u64, ProcError> {
    let malformed = || ProcError::Malformed { path: "/proc/self/status", field: "VmRSS" };
    let line = text.lines().find_map(|l| l.strip_prefix("VmRSS:")).ok_or_else(malformed)?;
    let kib = line.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).ok_or_else(malformed)?;
    Ok(kib.saturating_mul(1024))
}

/// `/proc/stat`'s first line: `cpu user nice system idle iowait irq softirq steal ...` in ticks.
fn parse_host_cpu(text: &str) -> Result<HostCpu, ProcError> {
    const MODES: [&str; 8] = ["user", "nice", "sys", "idle", "iowait", "irq", "softirq", "stolen"];
    let malformed = || ProcError::Malformed { path: "/proc/stat", field: "cpu" };
    let line = text.lines().next().and_then(|l| l.strip_prefix("cpu ")).ok_or_else(malformed)?;
    let values: Vec<u64> = line.split_whitespace().map_while(|v| v.parse().ok()).collect();
    if values.len() < 4 {
        return Err(malformed());
    }
    Ok(HostCpu(MODES.iter().zip(values).map(|(mode, ticks)| (*mode, ticks as f64 / USER_HZ)).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_cpu_is_read_after_a_comm_with_spaces_and_parentheses() {
        // Proves utime/stime are found by counting after the last ')' and converted from ticks to seconds.
        let stat = "42 (we ird) (name) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 1000 1 1 0";
        assert_eq!(parse_process_cpu(stat).unwrap(), ProcessCpu { user: 2.5, sys: 0.75 });
    }

    #[test]
    fn truncated_or_garbled_proc_text_is_an_error_not_a_panic() {
        // Proves short, empty and non-numeric inputs each give ProcError::Malformed.
        assert!(matches!(parse_process_cpu("42 (x) S 1 2"), Err(ProcError::Malformed { field: "utime", .. })));
        assert!(matches!(parse_process_cpu("no paren"), Err(ProcError::Malformed { field: "comm", .. })));
        assert!(matches!(parse_resident_bytes("VmRSS: lots kB"), Err(ProcError::Malformed { .. })));
        assert!(matches!(parse_resident_bytes(""), Err(ProcError::Malformed { .. })));
        assert!(matches!(parse_host_cpu("cpu 1 2"), Err(ProcError::Malformed { .. })));
        assert!(matches!(parse_host_cpu("intr 5"), Err(ProcError::Malformed { .. })));
    }

    #[test]
    fn resident_bytes_come_from_vmrss_in_kib() {
        // Proves the VmRSS line is found among others and scaled from kB to bytes.
        let status = "Name:\tsettee\nVmPeak:\t 9000 kB\nVmRSS:\t    2048 kB\nThreads: 4\n";
        assert_eq!(parse_resident_bytes(status).unwrap(), 2048 * 1024);
    }

    #[test]
    fn host_cpu_names_each_mode_present() {
        // Proves the first line's ticks map to modes in /proc/stat's order, in seconds, and extra fields are cut.
        let stat = "cpu  100 0 50 1000 5 0 1 0 0 0\ncpu0 100 0 50 1000 5 0 1 0 0 0\n";
        let HostCpu(modes) = parse_host_cpu(stat).unwrap();
        assert_eq!(modes[0], ("user", 1.0));
        assert_eq!(modes[2], ("sys", 0.5));
        assert_eq!(modes[3], ("idle", 10.0));
        assert_eq!(modes.len(), 8);
    }

    #[test]
    fn this_process_reports_cpu_and_memory_on_linux() {
        // Proves the readers work on the real /proc of the test process (Linux, where settee runs).
        assert!(process_resident_bytes().unwrap() > 0);
        assert!(process_cpu().is_ok());
        assert!(!host_cpu().unwrap().0.is_empty());
    }
}
