//! `--spec`: what to drive. `couchbase://HOST[:PORT][,HOST[:PORT]...][/BUCKET]` is a settee or Couchbase cluster
//! reached by a smart client (the port is the KV port, 11210 by default; the bucket is `default` unless named);
//! `couchbases://` is the same over TLS (the port is the KV TLS port, 11207 by default; every node is reached on its
//! `kvSSL` port; `--cacert` names the CA to trust). `memcached://HOST[:PORT]` is a plain memcached speaking the
//! binary protocol (port 11211 by default).

use std::fmt;

/// A parsed connection spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spec {
    Couchbase { seeds: Vec<String>, bucket: String, tls: bool },
    Memcached { addr: String },
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad --spec {spec:?}: {why}")]
pub struct SpecError {
    spec: String,
    why: &'static str,
}

impl Spec {
    pub fn parse(s: &str) -> Result<Spec, SpecError> {
        let err = |why| SpecError { spec: s.to_owned(), why };
        let (scheme, rest) = s.split_once("://").ok_or_else(|| err("expected couchbase:// or memcached://"))?;
        let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
        match scheme {
            "couchbase" | "couchbases" => {
                let tls = scheme == "couchbases";
                let (hosts, bucket) = rest.split_once('/').unwrap_or((rest, ""));
                let seeds: Vec<String> = hosts
                    .split(',')
                    .map(|h| with_port(h, if tls { 11207 } else { 11210 }))
                    .collect::<Option<_>>()
                    .ok_or_else(|| err("bad host"))?;
                if seeds.iter().any(|s| s.ends_with(":8091") || s.ends_with(":18091")) {
                    return Err(err(
                        "8091 and 18091 are REST ports; give the KV port (11210, or 11207 for TLS) or none",
                    ));
                }
                let bucket = if bucket.is_empty() { "default" } else { bucket.trim_end_matches('/') };
                Ok(Spec::Couchbase { seeds, bucket: bucket.to_owned(), tls })
            }
            "memcached" => {
                let host = rest.trim_end_matches('/');
                if host.contains(',') || host.contains('/') {
                    return Err(err("memcached:// takes one host and no bucket"));
                }
                Ok(Spec::Memcached { addr: with_port(host, 11211).ok_or_else(|| err("bad host"))? })
            }
            _ => Err(err("expected couchbase:// or memcached://")),
        }
    }

    /// `couchbase` or `memcached`.
    pub fn kind(&self) -> &'static str {
        match self {
            Spec::Couchbase { .. } => "couchbase",
            Spec::Memcached { .. } => "memcached",
        }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spec::Couchbase { seeds, bucket, tls } => {
                write!(f, "couchbase{}://{}/{bucket}", if *tls { "s" } else { "" }, seeds.join(","))
            }
            Spec::Memcached { addr } => write!(f, "memcached://{addr}"),
        }
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` as `host:port`; None when empty or malformed.
fn with_port(h: &str, default: u16) -> Option<String> {
    if h.is_empty() {
        return None;
    }
    if let Some(v6) = h.strip_prefix('[') {
        let (addr, tail) = v6.split_once(']')?;
        return match tail {
            "" => Some(format!("[{addr}]:{default}")),
            t => t.strip_prefix(':')?.parse::<u16>().ok().map(|p| format!("[{addr}]:{p}")),
        };
    }
    match h.split_once(':') {
        None => Some(format!("{h}:{default}")),
        Some((host, port)) if !host.is_empty() => port.parse::<u16>().ok().map(|p| format!("{host}:{p}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Couchbase specs take several seeds, default the port and bucket, and ignore query options.
    #[test]
    fn couchbase_specs() {
        assert_eq!(
            Spec::parse("couchbase://127.0.0.1").unwrap(),
            Spec::Couchbase { seeds: vec!["127.0.0.1:11210".into()], bucket: "default".into(), tls: false }
        );
        assert_eq!(
            Spec::parse("couchbase://a:12000,b,[::1]:3/travel?timeout=1").unwrap(),
            Spec::Couchbase {
                seeds: vec!["a:12000".into(), "b:11210".into(), "[::1]:3".into()],
                bucket: "travel".into(),
                tls: false
            }
        );
        assert_eq!(Spec::parse("couchbase://h/b").unwrap().to_string(), "couchbase://h:11210/b");
        assert_eq!(Spec::parse("couchbases://h/b").unwrap().to_string(), "couchbases://h:11207/b");
    }

    /// Memcached specs take one host and default to port 11211.
    #[test]
    fn memcached_specs() {
        assert_eq!(Spec::parse("memcached://localhost").unwrap(), Spec::Memcached { addr: "localhost:11211".into() });
        assert_eq!(Spec::parse("memcached://h:5").unwrap().kind(), "memcached");
        assert!(Spec::parse("memcached://a,b").is_err());
    }

    /// Malformed specs and the REST ports are refused with a reason.
    #[test]
    fn bad_specs() {
        for s in [
            "127.0.0.1:11210",
            "http://x",
            "couchbases://h:18091",
            "couchbase://",
            "couchbase://h:x",
            "couchbase://h:8091",
        ] {
            assert!(Spec::parse(s).is_err(), "{s}");
        }
    }
}
