//! The node's certificate files: reading PEM, and `<data-dir>/certs/`, where a node keeps its CA and its current
//! certificate across restarts.
//!
//! Layout of `<data-dir>/certs/`: `ca.pem` (the CA clients trust), `ca-key.pem` and `ca-name` (its key and common
//! name, kept to sign node certificates), `chain.pem` (the node's certificate, then any intermediates) and
//! `pkey.pem` (its key). Key files are created with mode 0600. Every file is written to a temporary name and
//! renamed, and `ca.pem` is written last: a set without it is incomplete and generated again.

use std::io::Write;
use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::generate::{generate_ca, sign_node_cert, CaKey};
use super::TlsError;

/// What `<data-dir>/certs` holds.
pub(super) struct Stored {
    /// The CA with its key (None for a set whose CA key is not kept).
    pub(super) ca: Option<CaKey>,
    pub(super) ca_pem: String,
    pub(super) chain: Vec<CertificateDer<'static>>,
    pub(super) key: PrivateKeyDer<'static>,
}

/// The certificates in `dir`, generating (and writing) a new CA and node certificate when it holds none.
pub(super) fn open_or_generate(dir: &Path, host: Option<&str>) -> Result<Stored, TlsError> {
    let ca_path = dir.join("ca.pem");
    if ca_path.exists() {
        let ca_pem = read_text(&ca_path)?;
        let ca = match (read_text(&dir.join("ca-key.pem")), read_text(&dir.join("ca-name"))) {
            (Ok(key_pem), Ok(name)) => {
                Some(CaKey { cert_pem: ca_pem.clone(), key_pem, common_name: name.trim().to_owned() })
            }
            _ => None,
        };
        let (chain, key) = (read_chain(&dir.join("chain.pem"))?, read_key(&dir.join("pkey.pem"))?);
        return Ok(Stored { ca, ca_pem, chain, key });
    }
    let ca = generate_ca()?;
    let node = install_ca(dir, &ca, host)?;
    tracing::info!(dir = %dir.display(), "generated a CA and a node certificate for the TLS ports");
    Ok(Stored { ca_pem: ca.cert_pem.clone(), ca: Some(ca), chain: vec![node.der], key: node.key_der })
}

/// Signs a new node certificate with `ca` and writes both into `dir`, replacing what was there (`ca.pem` last).
pub(super) fn install_ca(dir: &Path, ca: &CaKey, host: Option<&str>) -> Result<super::generate::NodeCert, TlsError> {
    let node = sign_node_cert(ca, host)?;
    std::fs::create_dir_all(dir).map_err(|source| TlsError::Write { path: dir.to_owned(), source })?;
    // A half-written set must not look complete at the next start.
    let _ = std::fs::remove_file(dir.join("ca.pem"));
    write_file(&dir.join("ca-key.pem"), &ca.key_pem, true)?;
    write_file(&dir.join("ca-name"), &ca.common_name, false)?;
    install_node_cert(dir, &node.pem, &node.key_pem)?;
    write_file(&dir.join("ca.pem"), &ca.cert_pem, false)?;
    Ok(node)
}

/// Writes the node's certificate chain and key into `dir`, replacing the ones there.
pub(super) fn install_node_cert(dir: &Path, chain_pem: &str, key_pem: &str) -> Result<(), TlsError> {
    write_file(&dir.join("pkey.pem"), key_pem, true)?;
    write_file(&dir.join("chain.pem"), chain_pem, false)
}

pub(super) fn read_text(path: &Path) -> Result<String, TlsError> {
    std::fs::read_to_string(path).map_err(|source| TlsError::Read { path: path.to_owned(), source })
}

pub(super) fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    parse_certs(read_text(path)?.as_bytes(), path)
}

pub(super) fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    parse_key(read_text(path)?.as_bytes(), path)
}

/// Every certificate of a PEM text, in order; at least one.
pub(super) fn parse_certs(pem: &[u8], path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadPem { path: path.to_owned(), reason: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_owned() });
    }
    Ok(certs)
}

/// The first private key of a PEM text (PKCS#8, PKCS#1 or SEC1).
pub(super) fn parse_key(pem: &[u8], path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey { path: path.to_owned() },
        e => TlsError::BadPem { path: path.to_owned(), reason: e.to_string() },
    })
}

/// Writes `text` to `path` (see [`write_replacing`]).
pub(super) fn write_file(path: &Path, text: &str, private: bool) -> Result<(), TlsError> {
    write_replacing(path, text.as_bytes(), private).map_err(|source| TlsError::Write { path: path.to_owned(), source })
}

/// Writes `bytes` to `path` through a synced temporary file and a rename, so a reader never sees half a file;
/// `private` files get mode 0600 from the start (others 0644). A temporary file an earlier run left is replaced.
pub(crate) fn write_replacing(path: &Path, bytes: &[u8], private: bool) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}
