//! The client side of SCRAM-SHA512 (RFC 5802, no channel binding), as the SDKs authenticate on a plain KV port:
//! the password never crosses the wire, only a proof of it. Sans-IO: [`ScramClient::first`] gives the
//! client-first message for SASL_AUTH, [`ScramClient::answer`] turns the server-first message into the
//! client-final one for SASL_STEP, and [`ScramClient::verify`] checks the server's signature in its final message.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha512};

/// The SASL mechanism name on the wire.
pub const MECHANISM: &[u8] = b"SCRAM-SHA512";
/// More iterations than any server should ask for (Couchbase's default is 15,000): refused rather than spent.
const ITERATIONS_MAX: u32 = 1 << 20;

/// Why an exchange failed on the client's side.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScramError {
    #[error("malformed server message: {0}")]
    Malformed(&'static str),
    #[error("the server's nonce does not extend ours")]
    Nonce,
    #[error("the server asked for {0} iterations")]
    Iterations(u32),
    #[error("the server's signature does not match: it does not know the password")]
    ServerSignature,
}

/// One exchange, from the client-first message to the server's final one.
pub struct ScramClient {
    client_first_bare: String,
    nonce: String,
    /// Set by `answer`: the signature the server's final message must carry.
    server_signature: Option<Vec<u8>>,
    password: String,
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// `user` as a SCRAM saslname: `=` and `,` escaped.
fn saslname(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

impl ScramClient {
    /// Starts an exchange for `user` with a random nonce.
    pub fn new(user: &str, password: &str) -> ScramClient {
        let mut raw = [0u8; 18];
        rand::rngs::OsRng.fill_bytes(&mut raw);
        ScramClient::with_nonce(user, password, &BASE64.encode(raw))
    }

    /// As `new`, with a chosen nonce (tests).
    pub fn with_nonce(user: &str, password: &str, nonce: &str) -> ScramClient {
        ScramClient {
            client_first_bare: format!("n={},r={nonce}", saslname(user)),
            nonce: nonce.to_owned(),
            server_signature: None,
            password: password.to_owned(),
        }
    }

    /// The client-first message (SASL_AUTH's value).
    pub fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// The client-final message (SASL_STEP's value) for the server-first message `r=<nonce>,s=<salt>,i=<n>`.
    pub fn answer(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let text = std::str::from_utf8(server_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let field = |name: &str| text.split(',').find_map(|f| f.strip_prefix(name));
        let nonce = field("r=").ok_or(ScramError::Malformed("no nonce"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramError::Nonce);
        }
        let salt = BASE64.decode(field("s=").ok_or(ScramError::Malformed("no salt"))?);
        let salt = salt.map_err(|_| ScramError::Malformed("salt not base64"))?;
        let iterations: u32 = field("i=").and_then(|i| i.parse().ok()).ok_or(ScramError::Malformed("no iterations"))?;
        if iterations == 0 || iterations > ITERATIONS_MAX {
            return Err(ScramError::Iterations(iterations));
        }
        let mut salted = vec![0u8; 64];
        pbkdf2::pbkdf2_hmac::<Sha512>(self.password.as_bytes(), &salt, iterations, &mut salted);
        let client_key = hmac(&salted, b"Client Key");
        let stored_key = Sha512::digest(&client_key);
        // "biws" is base64 of the gs2 header "n,,".
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        self.server_signature = Some(hmac(&hmac(&salted, b"Server Key"), auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message `v=<signature>`: a server that does not hold the password cannot make it.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let text = std::str::from_utf8(server_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let given = text.split(',').find_map(|f| f.strip_prefix("v=")).ok_or(ScramError::Malformed("no v="))?;
        let given = BASE64.decode(given).map_err(|_| ScramError::Malformed("signature not base64"))?;
        match &self.server_signature {
            Some(expected) if *expected == given => Ok(()),
            _ => Err(ScramError::ServerSignature),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the messages follow RFC 5802 (saslname escaping, the gs2 header, the combined nonce) and that the
    /// proof is one a server holding only the stored key accepts (checked the server's way here; against settee's
    /// server in test_xdcr.py's half-encryption test), and that the server's signature is checked.
    #[test]
    fn exchange_produces_a_proof_the_server_can_check_when_both_know_the_password() {
        let mut c = ScramClient::with_nonce("user,=x", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(c.first(), b"n,,n=user=2C=3Dx,r=rOprNGfwEbeRWgbNEkqO");
        let salt = b"0123456789abcdef";
        let server_first = format!("r=rOprNGfwEbeRWgbNEkqOsrv,s={},i=4096", BASE64.encode(salt));
        let final_msg = String::from_utf8(c.answer(server_first.as_bytes()).unwrap()).unwrap();
        let (without_proof, proof) = final_msg.split_once(",p=").unwrap();
        assert_eq!(without_proof, "c=biws,r=rOprNGfwEbeRWgbNEkqOsrv");
        // The server's check: ClientKey = proof XOR HMAC(StoredKey, AuthMessage), and H(ClientKey) = StoredKey.
        let mut salted = vec![0u8; 64];
        pbkdf2::pbkdf2_hmac::<Sha512>(b"pencil", salt, 4096, &mut salted);
        let stored = Sha512::digest(hmac(&salted, b"Client Key"));
        let auth = format!("n=user=2C=3Dx,r=rOprNGfwEbeRWgbNEkqO,{server_first},{without_proof}");
        let sig = hmac(&stored, auth.as_bytes());
        let key: Vec<u8> = BASE64.decode(proof).unwrap().iter().zip(&sig).map(|(p, s)| p ^ s).collect();
        assert_eq!(Sha512::digest(&key), stored);
        let server_sig = hmac(&hmac(&salted, b"Server Key"), auth.as_bytes());
        assert_eq!(c.verify(format!("v={}", BASE64.encode(&server_sig)).as_bytes()), Ok(()));
        assert_eq!(c.verify(b"v=AAAA"), Err(ScramError::ServerSignature));
    }

    /// Proves a server-first message that does not extend the client's nonce, or asks for absurd work, is refused.
    #[test]
    fn bad_server_first_messages_are_refused_when_answered() {
        let mut c = ScramClient::with_nonce("u", "p", "abc");
        assert_eq!(c.answer(b"r=xyz,s=AAAA,i=10"), Err(ScramError::Nonce));
        assert_eq!(c.answer(b"r=abc,s=AAAA,i=10"), Err(ScramError::Nonce));
        assert_eq!(c.answer(b"r=abcd,s=AAAA,i=0"), Err(ScramError::Iterations(0)));
        assert!(matches!(c.answer(b"r=abcd,i=10"), Err(ScramError::Malformed(_))));
        assert!(matches!(c.verify(b"v=AAAA"), Err(ScramError::ServerSignature)));
    }
}
