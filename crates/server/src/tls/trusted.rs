//! CAs an operator adds to those a node trusts (Couchbase's `loadTrustedCAs`): read from `<data-dir>/inbox/CA/`,
//! kept in `<data-dir>/certs/trusted-cas.pem` across restarts. A certificate a loaded CA signs can then be
//! installed with `reloadCertificate`, which is how an operator moves a node to a new CA without a restart.

use std::path::Path;

use rustls::pki_types::CertificateDer;

use super::{files, TlsError};

/// The file loaded CAs are kept in, inside `<data-dir>/certs`.
pub(super) const LOADED_FILE: &str = "trusted-cas.pem";

/// One trusted CA certificate: its PEM block and DER.
#[derive(Clone, Debug)]
pub(super) struct TrustedCert {
    pub(super) pem: String,
    pub(super) der: CertificateDer<'static>,
}

/// Every certificate of a PEM text, each with its own PEM block.
pub(super) fn split(text: &str, path: &Path) -> Result<Vec<TrustedCert>, TlsError> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut certs = Vec::new();
    let mut rest = text;
    while let Some(begin) = rest.find("-----BEGIN CERTIFICATE-----") {
        let Some(end) = rest[begin..].find(END) else {
            return Err(TlsError::BadPem { path: path.to_owned(), reason: "a certificate has no END line".into() });
        };
        let block = &rest[begin..begin + end + END.len()];
        let der = files::parse_certs(block.as_bytes(), path)?.remove(0);
        certs.push(TrustedCert { pem: format!("{block}\n"), der });
        rest = &rest[begin + end + END.len()..];
    }
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_owned() });
    }
    Ok(certs)
}

/// The CAs loaded before, from `certs_dir` (none when the file does not exist).
pub(super) fn read_loaded(certs_dir: &Path) -> Result<Vec<TrustedCert>, TlsError> {
    let path = certs_dir.join(LOADED_FILE);
    if !path.exists() {
        return Ok(Vec::new());
    }
    split(&files::read_text(&path)?, &path)
}

/// Every certificate in the files of `dir` (names starting with `.` skipped), in file-name order.
pub(super) fn read_inbox(dir: &Path) -> Result<Vec<TrustedCert>, TlsError> {
    let entries = std::fs::read_dir(dir).map_err(|source| TlsError::Read { path: dir.to_owned(), source })?;
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    paths.sort();
    let mut certs = Vec::new();
    for path in paths {
        let text = files::read_text(&path)?;
        for cert in split(&text, &path)? {
            // A certificate must at least serve as a trust anchor.
            webpki::anchor_from_trusted_cert(&cert.der).map_err(TlsError::Untrusted)?;
            certs.push(cert);
        }
    }
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: dir.to_owned() });
    }
    Ok(certs)
}

/// Writes the loaded CAs to `certs_dir`, replacing the file.
pub(super) fn write_loaded(certs_dir: &Path, loaded: &[TrustedCert]) -> Result<(), TlsError> {
    std::fs::create_dir_all(certs_dir).map_err(|source| TlsError::Write { path: certs_dir.to_owned(), source })?;
    let text: String = loaded.iter().map(|c| c.pem.as_str()).collect();
    files::write_file(&certs_dir.join(LOADED_FILE), &text, false)
}
