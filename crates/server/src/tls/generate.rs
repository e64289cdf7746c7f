//! A cluster CA and node certificates signed by it, made as Couchbase makes its self-generated cluster CA: ECDSA
//! P-256 keys, valid for 10 years. A node certificate names the node's address, `localhost`, 127.0.0.1 and ::1, and
//! serves TLS servers and clients.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::TlsError;

/// Years a generated certificate is valid for.
const VALID_YEARS: i32 = 10;

/// A CA that can sign: what a node keeps in `ca-key.pem` and `ca-name`, and what a joining node is given.
#[derive(Clone, Debug)]
pub(super) struct CaKey {
    pub(super) cert_pem: String,
    pub(super) key_pem: String,
    /// The CA's common name: the issuer of the certificates it signs must spell its subject exactly.
    pub(super) common_name: String,
}

/// A node certificate and its key, as PEM for the files and DER for rustls.
pub(super) struct NodeCert {
    pub(super) pem: String,
    pub(super) key_pem: String,
    pub(super) der: CertificateDer<'static>,
    pub(super) key_der: PrivateKeyDer<'static>,
}

/// A new CA, named so that CAs of different clusters differ.
pub(super) fn generate_ca() -> Result<CaKey, TlsError> {
    let common_name = format!("settee cluster CA {:08x}", rand::random::<u32>());
    let params = ca_params(&common_name);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(CaKey { cert_pem: cert.pem(), key_pem: key.serialize_pem(), common_name })
}

/// A new node certificate signed by `ca`, naming `host` (when the node binds one address) besides the loopback
/// names.
pub(super) fn sign_node_cert(ca: &CaKey, host: Option<&str>) -> Result<NodeCert, TlsError> {
    let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if let Some(h) = host {
        if !names.iter().any(|n| n == h) {
            names.insert(0, h.to_owned());
        }
    }
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, host.unwrap_or("localhost"));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params);
    let key = KeyPair::generate()?;
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let issuer = Issuer::new(ca_params(&ca.common_name), ca_key);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(NodeCert {
        pem: cert.pem(),
        key_pem: key.serialize_pem(),
        der: cert.der().clone(),
        key_der: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    })
}

/// The CA's parameters, the same every time for one name: signing after a restart or on another node needs the
/// subject and key identifier method the certificate was made with.
fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::OrganizationName, "settee");
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    set_validity(&mut params);
    params
}

/// From the start of last year (so a clock a little behind still accepts it) to `VALID_YEARS` later.
fn set_validity(params: &mut CertificateParams) {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // 31,556,952 s is the mean Gregorian year: the estimate is off by at most a day around New Year, which the
    // year of margin covers.
    let year = 1970 + i32::try_from(secs / 31_556_952).unwrap_or(0);
    params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + VALID_YEARS, 1, 1);
}
