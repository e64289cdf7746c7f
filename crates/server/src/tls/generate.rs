//! A node's own CA and certificate, made at its first start as Couchbase makes its self-generated cluster CA:
//! ECDSA P-256 keys, a CA valid for 10 years, a node certificate signed by it for the node's address, `localhost`
//! and 127.0.0.1 (and ::1), usable for TLS servers and clients.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::TlsError;

/// Years a generated certificate is valid for.
const VALID_YEARS: i32 = 10;

/// A freshly generated CA and node certificate, as PEM for the files and DER for rustls.
pub(super) struct GeneratedSet {
    pub(super) ca_pem: String,
    pub(super) ca_key_pem: String,
    pub(super) node_pem: String,
    pub(super) node_key_pem: String,
    pub(super) node_der: CertificateDer<'static>,
    pub(super) node_key_der: PrivateKeyDer<'static>,
}

/// Generates a CA and a node certificate it signs, naming `host` (when the node binds one address) besides the
/// loopback names.
pub(super) fn generate(host: Option<&str>) -> Result<GeneratedSet, TlsError> {
    let (first_year, last_year) = validity_years();
    let (not_before, not_after) = (rcgen::date_time_ymd(first_year, 1, 1), rcgen::date_time_ymd(last_year, 1, 1));
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params.distinguished_name.push(DnType::OrganizationName, "settee");
    ca_params.distinguished_name.push(DnType::CommonName, format!("settee cluster CA {}", serial_suffix()));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    (ca_params.not_before, ca_params.not_after) = (not_before, not_after);
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;

    let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if let Some(h) = host {
        if !names.iter().any(|n| n == h) {
            names.insert(0, h.to_owned());
        }
    }
    let mut node_params = CertificateParams::new(names)?;
    node_params.distinguished_name = DistinguishedName::new();
    node_params.distinguished_name.push(DnType::CommonName, host.unwrap_or("localhost"));
    node_params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    node_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    node_params.use_authority_key_identifier_extension = true;
    (node_params.not_before, node_params.not_after) = (not_before, not_after);
    let node_key = KeyPair::generate()?;
    let issuer = Issuer::new(ca_params, &ca_key);
    let node_cert = node_params.signed_by(&node_key, &issuer)?;

    Ok(GeneratedSet {
        ca_pem: ca_cert.pem(),
        ca_key_pem: ca_key.serialize_pem(),
        node_pem: node_cert.pem(),
        node_key_pem: node_key.serialize_pem(),
        node_der: node_cert.der().clone(),
        node_key_der: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(node_key.serialize_der())),
    })
}

/// From the start of last year (so a clock a little behind still accepts it) to `VALID_YEARS` later.
fn validity_years() -> (i32, i32) {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // 31,556,952 s is the mean Gregorian year: the estimate is off by at most a day around New Year, which the
    // year of margin covers.
    let year = 1970 + i32::try_from(secs / 31_556_952).unwrap_or(0);
    (year - 1, year + VALID_YEARS)
}

/// A few random hex digits, so CAs of different clusters have different names.
fn serial_suffix() -> String {
    format!("{:08x}", rand::random::<u32>())
}
