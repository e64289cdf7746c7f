//! The node's certificate files: reading PEM, and `<data-dir>/certs/`, where a node keeps the CA it generated
//! and its current certificate across restarts.
//!
//! Layout of `<data-dir>/certs/`: `ca.pem` (the CA clients trust), `ca-key.pem` (its key, kept to sign node
//! certificates), `chain.pem` (the node's certificate, then any intermediates) and `pkey.pem` (its key). Key files
//! are created with mode 0600. Every file is written to a temporary name and renamed, and `ca.pem` is written
//! last: a set without it is incomplete and generated again.

use std::io::Write;
use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::generate::generate;
use super::TlsError;

/// The CA PEM, the node's chain and its key from `dir`, generating (and writing) a new set when it holds none.
pub(super) fn open_or_generate(
    dir: &Path,
    host: Option<&str>,
) -> Result<(String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let ca_path = dir.join("ca.pem");
    if ca_path.exists() {
        let ca_pem = read_text(&ca_path)?;
        return Ok((ca_pem, read_chain(&dir.join("chain.pem"))?, read_key(&dir.join("pkey.pem"))?));
    }
    let set = generate(host)?;
    std::fs::create_dir_all(dir).map_err(|source| TlsError::Write { path: dir.to_owned(), source })?;
    write_file(&dir.join("ca-key.pem"), &set.ca_key_pem, true)?;
    install_node_cert(dir, &set.node_pem, &set.node_key_pem)?;
    write_file(&ca_path, &set.ca_pem, false)?;
    tracing::info!(dir = %dir.display(), "generated a CA and a node certificate for the TLS ports");
    Ok((set.ca_pem, vec![set.node_der], set.node_key_der))
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

/// Writes `text` to `path` through a temporary file and a rename; `private` files get mode 0600 from the start.
fn write_file(path: &Path, text: &str, private: bool) -> Result<(), TlsError> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    let err = |source| TlsError::Write { path: path.to_owned(), source };
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(&tmp)
        .map_err(err)?;
    file.write_all(text.as_bytes()).map_err(err)?;
    file.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}
