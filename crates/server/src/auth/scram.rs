//! The server side of SCRAM (RFC 5802) without channel binding, as `SCRAM-SHA1`, `SCRAM-SHA256` and
//! `SCRAM-SHA512`.
//!
//! Sans-IO: a connection calls `ScramServer::start` with the SASL_AUTH value, replies AUTH_CONTINUE with the
//! returned server-first message, keeps the `ScramServer`, and calls `step` with the SASL_STEP value. Every
//! error maps to AUTH_ERROR.
//!
//! An unknown user gets a server-first message built from a decoy salt that is stable per user, so that
//! SASL_AUTH answers the same way for users that exist and users that do not; the exchange then fails in `step`.

use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use rand::rngs::OsRng;
use rand::{CryptoRng, RngCore};
use subtle::ConstantTimeEq;

use super::credentials::{ScramKeys, DEFAULT_ITERATIONS, SALT_BYTES};
use super::{AuthError, Credentials, ScramHash, SASL_MESSAGE_BYTES_MAX};

/// Random bytes in the server's half of the nonce (base64-encoded on the wire).
const SERVER_NONCE_BYTES: usize = 18;
/// Longest client nonce accepted; the clients send 8 to 16 characters.
const CLIENT_NONCE_CHARS_MAX: usize = 256;

/// One connection's SCRAM exchange between the server-first and the client-final message.
pub struct ScramServer {
    hash: ScramHash,
    user: String,
    /// The gs2 header exactly as the client sent it (`n,,` or `y,,`); `c=` in client-final must encode it.
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    /// Client nonce followed by server nonce, as client-final must repeat it.
    nonce: String,
    keys: ScramKeys,
    /// False when the user does not exist and `keys` are a decoy; `step` then fails whatever the proof.
    user_known: bool,
}

impl ScramServer {
    /// Handles client-first (`n,,n=<user>,r=<cnonce>`): returns the exchange state and the server-first
    /// message `r=<cnonce><snonce>,s=<salt>,i=<iterations>`.
    pub fn start(
        hash: ScramHash,
        client_first: &[u8],
        lookup: impl Fn(&str) -> Option<Credentials>,
    ) -> Result<(ScramServer, Vec<u8>), AuthError> {
        ScramServer::start_with_rng(hash, client_first, lookup, &mut OsRng)
    }

    /// As `start`, with the server nonce drawn from `rng`; the simulator passes its seeded generator here.
    pub fn start_with_rng<R: RngCore + CryptoRng>(
        hash: ScramHash,
        client_first: &[u8],
        lookup: impl Fn(&str) -> Option<Credentials>,
        rng: &mut R,
    ) -> Result<(ScramServer, Vec<u8>), AuthError> {
        let mut server_nonce = [0u8; SERVER_NONCE_BYTES];
        rng.fill_bytes(&mut server_nonce);
        ScramServer::start_with_server_nonce(hash, client_first, lookup, &BASE64.encode(server_nonce))
    }

    /// The whole of `start` with the server nonce given; tests use it to reproduce published vectors.
    pub(crate) fn start_with_server_nonce(
        hash: ScramHash,
        client_first: &[u8],
        lookup: impl Fn(&str) -> Option<Credentials>,
        server_nonce: &str,
    ) -> Result<(ScramServer, Vec<u8>), AuthError> {
        let first = ClientFirst::parse(client_first)?;
        let (keys, user_known) = match lookup(&first.user) {
            Some(credentials) => (credentials.scram(hash).clone(), true),
            None => (decoy_keys(hash, &first.user), false),
        };
        let nonce = format!("{}{server_nonce}", first.client_nonce);
        let server_first = format!("r={nonce},s={},i={}", BASE64.encode(&keys.salt), keys.iterations);
        let reply = server_first.clone().into_bytes();
        let server = ScramServer {
            hash,
            user: first.user,
            gs2_header: first.gs2_header.to_owned(),
            client_first_bare: first.bare.to_owned(),
            server_first,
            nonce,
            keys,
            user_known,
        };
        Ok((server, reply))
    }

    /// The mechanism this exchange was started with; SASL_STEP must name the same one.
    pub fn hash(&self) -> ScramHash {
        self.hash
    }

    /// Handles client-final (`c=biws,r=<nonce>,p=<proof>`): on success returns the authenticated user name and
    /// the server-final message `v=<ServerSignature>`.
    pub fn step(self, client_final: &[u8]) -> Result<(String, Vec<u8>), AuthError> {
        if client_final.len() > SASL_MESSAGE_BYTES_MAX {
            return Err(AuthError::Malformed("client-final is too long"));
        }
        let text = std::str::from_utf8(client_final).map_err(|_| AuthError::Malformed("client-final is not UTF-8"))?;
        // The proof is the last attribute and is not covered by AuthMessage.
        let (without_proof, proof) =
            text.rsplit_once(",p=").ok_or(AuthError::Malformed("client-final has no proof"))?;
        let mut attributes = without_proof.split(',');
        let channel_binding = attributes
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or(AuthError::Malformed("client-final must start with c="))?;
        let nonce = attributes
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or(AuthError::Malformed("client-final must have r= second"))?;
        if attributes.any(|extension| !is_attribute(extension)) {
            return Err(AuthError::Malformed("client-final has a malformed extension"));
        }
        let channel_binding = BASE64.decode(channel_binding).map_err(|_| AuthError::Malformed("c= is not base64"))?;
        let proof = BASE64.decode(proof).map_err(|_| AuthError::Malformed("p= is not base64"))?;
        if proof.len() != self.hash.output_bytes() {
            return Err(AuthError::Malformed("p= has the wrong length for the hash"));
        }
        if channel_binding != self.gs2_header.as_bytes() || nonce != self.nonce {
            return Err(AuthError::Failed);
        }

        let auth_message = format!("{},{},{}", self.client_first_bare, self.server_first, without_proof);
        let client_signature = self.hash.hmac(&self.keys.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
        let proof_matches: bool = self.hash.digest(&client_key).ct_eq(&self.keys.stored_key).into();
        if !(proof_matches && self.user_known) {
            return Err(AuthError::Failed);
        }
        let server_signature = self.hash.hmac(&self.keys.server_key, auth_message.as_bytes());
        Ok((self.user, format!("v={}", BASE64.encode(server_signature)).into_bytes()))
    }
}

impl std::fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramServer").field("hash", &self.hash).field("user", &self.user).finish_non_exhaustive()
    }
}

/// The parts of client-first the server needs, borrowed from the message.
struct ClientFirst<'a> {
    gs2_header: &'a str,
    bare: &'a str,
    user: String,
    client_nonce: &'a str,
}

impl<'a> ClientFirst<'a> {
    fn parse(message: &'a [u8]) -> Result<ClientFirst<'a>, AuthError> {
        if message.len() > SASL_MESSAGE_BYTES_MAX {
            return Err(AuthError::Malformed("client-first is too long"));
        }
        let text = std::str::from_utf8(message).map_err(|_| AuthError::Malformed("client-first is not UTF-8"))?;
        let (flag, rest) = text.split_once(',').ok_or(AuthError::Malformed("client-first has no gs2 header"))?;
        match flag {
            "n" | "y" => {}
            _ if flag.starts_with("p=") => return Err(AuthError::Malformed("channel binding is not supported")),
            _ => return Err(AuthError::Malformed("gs2 flag must be n or y")),
        }
        let (authzid, bare) = rest.split_once(',').ok_or(AuthError::Malformed("gs2 header is incomplete"))?;
        let gs2_header = &text[..text.len() - bare.len()];

        let mut attributes = bare.split(',');
        // A leading `m=` (reserved mandatory extension) fails here, as RFC 5802 §5.1 requires.
        let user = attributes
            .next()
            .and_then(|a| a.strip_prefix("n="))
            .ok_or(AuthError::Malformed("client-first-bare must start with n="))?;
        let client_nonce = attributes
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or(AuthError::Malformed("client-first-bare must have r= second"))?;
        if attributes.any(|extension| !is_attribute(extension)) {
            return Err(AuthError::Malformed("client-first has a malformed extension"));
        }
        let user = decode_saslname(user)?;
        if user.is_empty() {
            return Err(AuthError::Malformed("user name is empty"));
        }
        if !is_valid_nonce(client_nonce) {
            return Err(AuthError::Malformed("client nonce is empty, too long or not printable"));
        }
        // Acting on behalf of another user is not supported; naming oneself is harmless.
        if !authzid.is_empty() {
            let authzid = authzid.strip_prefix("a=").ok_or(AuthError::Malformed("authzid must start with a="))?;
            if decode_saslname(authzid)? != user {
                return Err(AuthError::Failed);
            }
        }
        Ok(ClientFirst { gs2_header, bare, user, client_nonce })
    }
}

/// Undoes RFC 5802's escaping of user names: `=2C` is `,` and `=3D` is `=`; any other `=` is an error.
fn decode_saslname(escaped: &str) -> Result<String, AuthError> {
    let mut decoded = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find('=') {
        decoded.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => decoded.push(','),
            Some("=3D") => decoded.push('='),
            _ => return Err(AuthError::Malformed("bad escape in user name")),
        }
        rest = &rest[at + 3..];
    }
    decoded.push_str(rest);
    Ok(decoded)
}

/// RFC 5802 asks for printable characters without spaces, but the C++ SDK (1.3.x, in Python 4.6) sends a nonce
/// such as `0x7b 0xffffff97 0x74 ...`, with spaces: accept spaces, refuse commas and control characters.
fn is_valid_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce.len() <= CLIENT_NONCE_CHARS_MAX
        && nonce.bytes().all(|b| (0x20..=0x7e).contains(&b) && b != b',')
}

/// An extension attribute: one ASCII letter, `=`, then a value.
fn is_attribute(attribute: &str) -> bool {
    let bytes = attribute.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b'='
}

/// Keys for a user that does not exist. The salt is an HMAC of the user name under a per-process secret, so
/// that asking twice gives the same answer, exactly as for a real user.
fn decoy_keys(hash: ScramHash, user: &str) -> ScramKeys {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    let secret = SECRET.get_or_init(|| {
        let mut secret = [0u8; 32];
        OsRng.fill_bytes(&mut secret);
        secret
    });
    let mut input = Vec::with_capacity(user.len() + 1);
    input.push(hash.output_bytes() as u8);
    input.extend_from_slice(user.as_bytes());
    let mut salt = ScramHash::Sha256.hmac(secret, &input);
    salt.truncate(SALT_BYTES);
    ScramKeys {
        stored_key: hash.hmac(secret, b"decoy StoredKey"),
        server_key: hash.hmac(secret, b"decoy ServerKey"),
        salt,
        iterations: DEFAULT_ITERATIONS,
    }
}

#[cfg(test)]
mod tests;
