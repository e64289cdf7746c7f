//! SCRAM exchanges driven by a small client written from RFC 5802, plus the RFC's published vectors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

/// The client side of one exchange, computed from the password as RFC 5802 §3 describes.
struct TestClient {
    hash: ScramHash,
    password: &'static str,
    client_first_bare: String,
}

impl TestClient {
    fn new(hash: ScramHash, user: &str, password: &'static str, client_nonce: &str) -> TestClient {
        let escaped = user.replace('=', "=3D").replace(',', "=2C");
        TestClient { hash, password, client_first_bare: format!("n={escaped},r={client_nonce}") }
    }

    fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// Returns client-final and the `v=` server-final the client expects.
    fn client_final(&self, server_first: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let server_first = std::str::from_utf8(server_first).unwrap();
        // gocbcore's rule: exactly three fields, r= then s= then i=.
        let fields: Vec<&str> = server_first.split(',').collect();
        assert_eq!(fields.len(), 3, "server-first must have exactly three fields: {server_first}");
        let nonce = fields[0].strip_prefix("r=").unwrap();
        let salt = BASE64.decode(fields[1].strip_prefix("s=").unwrap()).unwrap();
        let iterations: u32 = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
        let client_nonce = self.client_first_bare.rsplit_once("r=").unwrap().1;
        assert!(nonce.starts_with(client_nonce) && nonce.len() > client_nonce.len());

        let salted = self.hash.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = self.hash.hmac(&salted, b"Client Key");
        let stored_key = self.hash.digest(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let signature = self.hash.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        let server_key = self.hash.hmac(&salted, b"Server Key");
        let server_signature = self.hash.hmac(&server_key, auth_message.as_bytes());
        (
            format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes(),
            format!("v={}", BASE64.encode(server_signature)).into_bytes(),
        )
    }
}

fn users(name: &'static str, password: &'static str) -> impl Fn(&str) -> Option<Credentials> {
    let credentials = Credentials::from_password(password);
    move |user| (user == name).then(|| credentials.clone())
}

#[test]
fn full_exchange_succeeds_for_every_hash() {
    // Proves an RFC 5802 client with the right password authenticates under each hash and gets a correct `v=`.
    let lookup = users("alice", "password1");
    for hash in ScramHash::ALL {
        let client = TestClient::new(hash, "alice", "password1", "fyko+d2lbbFgONRv");
        let (server, server_first) = ScramServer::start(hash, &client.client_first(), &lookup).unwrap();
        let (client_final, expected_server_final) = client.client_final(&server_first);
        let (user, server_final) = server.step(&client_final).unwrap();
        assert_eq!(user, "alice");
        assert_eq!(server_final, expected_server_final, "{hash:?}");
    }
}

#[test]
fn step_fails_when_the_password_is_wrong() {
    // Proves a well-formed proof computed from another password gives Failed at step.
    let lookup = users("alice", "password1");
    for hash in ScramHash::ALL {
        let client = TestClient::new(hash, "alice", "password2", "abcdefgh");
        let (server, server_first) = ScramServer::start(hash, &client.client_first(), &lookup).unwrap();
        let (client_final, _) = client.client_final(&server_first);
        assert_eq!(server.step(&client_final).unwrap_err(), AuthError::Failed);
    }
}

#[test]
fn unknown_user_gets_a_stable_decoy_salt_and_fails_at_step() {
    // Proves SASL_AUTH for a missing user looks like a real one (same salt twice, 3 fields) and step fails.
    let lookup = users("alice", "password1");
    let client = TestClient::new(ScramHash::Sha512, "mallory", "password1", "abcdefgh");
    let (_, first_a) = ScramServer::start(ScramHash::Sha512, &client.client_first(), &lookup).unwrap();
    let (server, first_b) = ScramServer::start(ScramHash::Sha512, &client.client_first(), &lookup).unwrap();
    let salt = |m: &[u8]| std::str::from_utf8(m).unwrap().split(',').nth(1).unwrap().to_owned();
    assert_eq!(salt(&first_a), salt(&first_b));
    assert!(std::str::from_utf8(&first_b).unwrap().ends_with(",i=4096"));
    let (client_final, _) = client.client_final(&first_b);
    assert_eq!(server.step(&client_final).unwrap_err(), AuthError::Failed);
}

#[test]
fn step_fails_when_the_nonce_or_channel_binding_is_tampered_with() {
    // Proves a correct proof is refused when r= differs from the issued nonce or c= from the gs2 header.
    let lookup = users("alice", "password1");
    let client = TestClient::new(ScramHash::Sha256, "alice", "password1", "abcdefgh");
    let (server, server_first) = ScramServer::start(ScramHash::Sha256, &client.client_first(), &lookup).unwrap();
    let (client_final, _) = client.client_final(&server_first);
    let text = String::from_utf8(client_final).unwrap();
    let tampered = text.replacen("r=abcdefgh", "r=abcdefgX", 1);
    assert_eq!(server.step(tampered.as_bytes()).unwrap_err(), AuthError::Failed);

    let (server, _) = ScramServer::start(ScramHash::Sha256, &client.client_first(), &lookup).unwrap();
    let wrong_binding = text.replacen("c=biws", "c=eSws", 1);
    assert_eq!(server.step(wrong_binding.as_bytes()).unwrap_err(), AuthError::Failed);
}

#[test]
fn escaped_user_names_are_decoded_before_lookup() {
    // Proves `=2C` and `=3D` in n= reach the lookup as `,` and `=`, and the exchange then succeeds.
    let lookup = users("a,b=c", "pw");
    let client = TestClient::new(ScramHash::Sha1, "a,b=c", "pw", "nonce123");
    assert_eq!(client.client_first_bare, "n=a=2Cb=3Dc,r=nonce123");
    let (server, server_first) = ScramServer::start(ScramHash::Sha1, &client.client_first(), &lookup).unwrap();
    let (client_final, _) = client.client_final(&server_first);
    assert_eq!(server.step(&client_final).unwrap().0, "a,b=c");
}

#[test]
fn y_flag_is_accepted_and_bound_into_the_proof() {
    // Proves a client sending `y,,` authenticates when c= encodes `y,,` (base64 `eSws`), per RFC 5802 §6.
    let lookup = users("alice", "pw");
    let client = TestClient::new(ScramHash::Sha256, "alice", "pw", "ynonce");
    let client_first = format!("y,,{}", client.client_first_bare);
    let (server, server_first) = ScramServer::start(ScramHash::Sha256, client_first.as_bytes(), &lookup).unwrap();
    let (client_final, _) = client.client_final(&server_first);
    // The test client signs `c=biws`; redo it with `c=eSws` by recomputing over the changed AuthMessage.
    let rebound = String::from_utf8(client_final).unwrap().replacen("c=biws", "c=eSws", 1);
    let (without_proof, _) = rebound.rsplit_once(",p=").unwrap();
    let salted = ScramHash::Sha256.salted_password(b"pw", server.keys.salt(), 4096);
    let client_key = ScramHash::Sha256.hmac(&salted, b"Client Key");
    let stored = ScramHash::Sha256.digest(&client_key);
    let server_first = std::str::from_utf8(&server_first).unwrap();
    let auth = format!("{},{server_first},{without_proof}", client.client_first_bare);
    let sig = ScramHash::Sha256.hmac(&stored, auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(k, s)| k ^ s).collect();
    let message = format!("{without_proof},p={}", BASE64.encode(proof));
    assert_eq!(server.step(message.as_bytes()).unwrap().0, "alice");
}

#[test]
fn client_nonce_with_spaces_as_the_cxx_sdk_sends_is_accepted() {
    // Regression: the C++ SDK (Python 4.6) sends a client nonce containing spaces; the exchange must succeed.
    let lookup = users("alice", "pw");
    let client = TestClient::new(ScramHash::Sha512, "alice", "pw", "0x7b 0xffffff97 0x74");
    let (server, server_first) = ScramServer::start(ScramHash::Sha512, &client.client_first(), &lookup).unwrap();
    let (client_final, _) = client.client_final(&server_first);
    assert_eq!(server.step(&client_final).unwrap().0, "alice");
}

/// Runs one exchange against a published vector: the given server nonce and salt, and a fixed client-final.
fn run_vector(hash: ScramHash, salt_b64: &str, server_nonce: &str, messages: [&str; 4]) {
    let [client_first, server_first, client_final, server_final] = messages;
    let salt = BASE64.decode(salt_b64).unwrap();
    let credentials = Credentials::from_password_with_salt("pencil", &salt, 4096);
    let lookup = move |user: &str| (user == "user").then(|| credentials.clone());
    let (server, first) =
        ScramServer::start_with_server_nonce(hash, client_first.as_bytes(), lookup, server_nonce).unwrap();
    assert_eq!(std::str::from_utf8(&first).unwrap(), server_first);
    let (user, last) = server.step(client_final.as_bytes()).unwrap();
    assert_eq!(user, "user");
    assert_eq!(std::str::from_utf8(&last).unwrap(), server_final);
}

#[test]
fn rfc7677_sha256_vector_is_reproduced() {
    // Proves byte-exact agreement with the SCRAM-SHA-256 example in RFC 7677 §3.
    run_vector(
        ScramHash::Sha256,
        "W22ZaJ0SNY7soEsUEjb6gQ==",
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        [
            "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
        ],
    );
}

#[test]
fn rfc5802_sha1_vector_is_reproduced() {
    // Proves byte-exact agreement with the SCRAM-SHA-1 example in RFC 5802 §5.
    run_vector(
        ScramHash::Sha1,
        "QSXCR+Q6sek8bf92",
        "3rfcNHYJY1ZVvWVs7j",
        [
            "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
            "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
        ],
    );
}

#[test]
fn malformed_client_first_gives_malformed() {
    // Proves each way client-first can break the grammar is reported as Malformed, not Failed or a panic.
    let lookup = users("alice", "pw");
    let cases: [&[u8]; 14] = [
        b"",
        b"n",
        b"n,,",
        b"p=tls-unique,,n=alice,r=abc",
        b"x,,n=alice,r=abc",
        b"n,,r=abc,n=alice",
        b"n,,m=ext,n=alice,r=abc",
        b"n,,n=al=ice,r=abc",
        b"n,,n=al=2,r=abc",
        b"n,,n=,r=abc",
        b"n,,n=alice,r=",
        b"n,,n=alice,r=a\tb",
        b"n,,n=alice",
        b"n,,n=alice,r=abc\xff",
    ];
    for case in cases {
        let result = ScramServer::start(ScramHash::Sha256, case, &lookup);
        assert!(matches!(result, Err(AuthError::Malformed(_))), "{:?}", String::from_utf8_lossy(case));
    }
    let too_long = format!("n,,n=alice,r={}", "a".repeat(SASL_MESSAGE_BYTES_MAX));
    assert!(matches!(ScramServer::start(ScramHash::Sha1, too_long.as_bytes(), &lookup), Err(AuthError::Malformed(_))));
}

#[test]
fn malformed_client_final_gives_malformed() {
    // Proves each way client-final can break the grammar is reported as Malformed.
    let lookup = users("alice", "pw");
    let nonce_prefix = "c=biws,r=abc";
    let cases = [
        String::new(),
        "c=biws".to_owned(),
        nonce_prefix.to_owned(),
        format!("r=abc,c=biws,p={}", BASE64.encode([0u8; 32])),
        format!("{nonce_prefix},p=!!notbase64"),
        format!("{nonce_prefix},p={}", BASE64.encode([0u8; 20])),
        format!("c=***,r=abc,p={}", BASE64.encode([0u8; 32])),
        format!("{nonce_prefix},,p={}", BASE64.encode([0u8; 32])),
    ];
    for case in cases {
        let (server, _) = ScramServer::start(ScramHash::Sha256, b"n,,n=alice,r=abc", &lookup).unwrap();
        assert!(matches!(server.step(case.as_bytes()), Err(AuthError::Malformed(_))), "{case}");
    }
}

#[test]
fn random_and_mutated_messages_never_panic() {
    // Proves, over seeded random bytes and single-byte mutations of a valid exchange, that the parser returns
    // Malformed or Failed and never panics or accepts a modified proof.
    let mut rng = StdRng::seed_from_u64(0x5e77ee);
    let lookup = users("alice", "password1");
    let client = TestClient::new(ScramHash::Sha1, "alice", "password1", "abcdefgh");
    let server_nonce = "fixednonce";
    let (_, server_first) =
        ScramServer::start_with_server_nonce(ScramHash::Sha1, &client.client_first(), &lookup, server_nonce).unwrap();
    let (valid_final, _) = client.client_final(&server_first);
    for round in 0..2_000 {
        let mut first = client.client_first();
        let mut last = valid_final.clone();
        if round % 2 == 0 {
            let len = rng.gen_range(0..48);
            first = (0..len).map(|_| rng.gen()).collect();
            last = (0..rng.gen_range(0..96)).map(|_| rng.gen()).collect();
        } else {
            let at = rng.gen_range(0..last.len());
            last[at] = rng.gen();
            if rng.gen_bool(0.3) {
                let at = rng.gen_range(0..first.len());
                first[at] = rng.gen();
            }
        }
        let started = ScramServer::start_with_server_nonce(ScramHash::Sha1, &first, &lookup, server_nonce);
        let Ok((server, _)) = started else { continue };
        match server.step(&last) {
            Err(AuthError::Malformed(_) | AuthError::Failed) => {}
            Ok(_) => assert!(first == client.client_first() && last == valid_final, "accepted a mutation"),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn server_first_and_the_proof_check_derive_nothing() {
    // Proves the claim that keeps SCRAM on the KV worker thread (issue 17): with the salted password stored, neither
    // the server-first message (for a known user, or an unknown one's decoy) nor the final proof check runs PBKDF2.
    let credentials = Credentials::from_password_with_salt("pencil", b"salt", 64);
    let lookup = |user: &str| (user == "user").then(|| credentials.clone());
    let derivations = || crate::auth::mechanism::DERIVATIONS_ON_THIS_THREAD.with(|n| n.get());
    for hash in ScramHash::ALL {
        let client = TestClient::new(hash, "user", "pencil", "fyko+d2lbbFgONRv9qkxdawL");
        let stranger = TestClient::new(hash, "nobody", "pencil", "fyko+d2lbbFgONRv9qkxdawL");
        let before = derivations();
        let (server, first) = ScramServer::start(hash, &client.client_first(), lookup).unwrap();
        let (_, _) = ScramServer::start(hash, &stranger.client_first(), lookup).unwrap();
        assert_eq!(derivations(), before, "{hash:?}: server-first derived");
        let (client_final, _) = client.client_final(&first);
        let during_client = derivations();
        server.step(&client_final).unwrap();
        assert_eq!(derivations(), during_client, "{hash:?}: the proof check derived");
    }
}
