//! `application/x-www-form-urlencoded` bodies, the format of every ns_server write.
//!
//! Parsed by hand rather than through axum's `Form` extractor because the SDKs do not all send a content type
//! that extractor accepts, and because a body that is not valid form data must still reach the handler (ns_server
//! then answers with a field error, not a 415).

/// ns_server's error text for a boolean field holding something else.
pub(crate) const BOOL_EXPECTED: &str = "The value must be one of the following: [true,false]";

/// The fields of one form body, in the order sent.
#[derive(Clone, Debug, Default)]
pub(crate) struct Form {
    pairs: Vec<(String, String)>,
}

impl Form {
    /// Parses `body`; undecodable escapes are kept literally and invalid UTF-8 is replaced, so this never fails.
    pub(crate) fn parse(body: &[u8]) -> Form {
        let pairs = body
            .split(|b| *b == b'&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = match pair.iter().position(|b| *b == b'=') {
                    Some(at) => (&pair[..at], &pair[at + 1..]),
                    None => (pair, &[][..]),
                };
                (decode(key), decode(value))
            })
            .collect();
        Form { pairs }
    }

    /// The value of `key`; when a key is repeated the last value wins, as in ns_server.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The field names, in the order sent.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|(k, _)| k.as_str())
    }

    /// Every field, in the order sent.
    pub(crate) fn into_pairs(self) -> Vec<(String, String)> {
        self.pairs
    }

    /// The boolean `key`, as ns_server takes one (`true` or `false`); absent is None, anything else the field
    /// error ns_server answers.
    pub(crate) fn get_bool(&self, key: &str) -> Result<Option<bool>, super::error::RestError> {
        match self.get(key) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(_) => Err(super::error::RestError::field(key, BOOL_EXPECTED)),
        }
    }

    /// The first of `keys` present, for fields with legacy aliases (`ramQuota` / `ramQuotaMB`).
    pub(crate) fn get_any(&self, keys: &[&str]) -> Option<&str> {
        keys.iter().find_map(|k| self.get(k))
    }
}

/// Percent-decodes one component, with `+` as a space.
fn decode(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => match (raw.get(i + 1).and_then(hex), raw.get(i + 2).and_then(hex)) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: &u8) -> Option<u8> {
    (*b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_decode_like_ns_server_reads_them() {
        // Proves percent escapes, `+` as space, keys without `=`, empty pairs and last-one-wins repeats.
        let form = Form::parse(b"name=a%2Bb+c&roles=data_reader%5Bdefault%5D%2Cadmin&&flag&name=z&x=%zz%4");
        assert_eq!(form.get("name"), Some("z"));
        assert_eq!(form.get("roles"), Some("data_reader[default],admin"));
        assert_eq!(form.get("flag"), Some(""));
        assert_eq!(form.get("x"), Some("%zz%4"));
        assert_eq!(form.get("missing"), None);
        assert_eq!(Form::parse(b"ramQuotaMB=100").get_any(&["ramQuota", "ramQuotaMB"]), Some("100"));
        assert_eq!(Form::parse(b"a=%FF").get("a"), Some("\u{fffd}"));
    }
}
