use settee_client::{Connection, OwnedResponse};
use settee_mcbp::Request;
use settee_types::vbucket_for_key;

pub fn req<'a>(opcode: u8, key: &'a [u8], extras: &'a [u8], value: &'a [u8]) -> Request<'a> {
    Request { extras, value, ..Request::client(opcode, key) }
}

/// The vBucket of a key as the SDKs compute it (the key without its collection prefix).
pub fn vb(key: &[u8]) -> u16 {
    vbucket_for_key(key, 1024).0
}

pub async fn set(c: &mut Connection, key: &[u8], value: &[u8], flags: u32, expiry: u32) -> OwnedResponse {
    let mut extras = flags.to_be_bytes().to_vec();
    extras.extend_from_slice(&expiry.to_be_bytes());
    let k = c.key(0, key);
    c.call(0x01, &k, &extras, value, vb(key), 0).await.unwrap()
}

pub async fn get(c: &mut Connection, key: &[u8]) -> OwnedResponse {
    let k = c.key(0, key);
    c.call(0x00, &k, &[], &[], vb(key), 0).await.unwrap()
}
