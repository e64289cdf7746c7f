//! A minimal ZIP writer for `collect-info` bundles: stored (uncompressed) entries with CRC-32, as every unzip
//! reads them. Entries and the archive stay under 4 GiB (a bundle is a few MiB); larger input is refused.

use std::io::Write;

/// Why an archive could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("{0} is too large for a ZIP entry without ZIP64")]
    TooLarge(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Writes entries one after another, then the central directory on `finish`.
pub struct ZipWriter<W: Write> {
    out: W,
    offset: u32,
    central: Vec<u8>,
    entries: u16,
}

impl<W: Write> ZipWriter<W> {
    pub fn new(out: W) -> ZipWriter<W> {
        ZipWriter { out, offset: 0, central: Vec::new(), entries: 0 }
    }

    /// Adds the file `name` (a relative path with `/` separators) holding `data`.
    pub fn add(&mut self, name: &str, data: &[u8]) -> Result<(), ZipError> {
        let too_large = || ZipError::TooLarge(name.to_owned());
        let size = u32::try_from(data.len()).map_err(|_| too_large())?;
        let name_len = u16::try_from(name.len()).map_err(|_| too_large())?;
        self.entries = self.entries.checked_add(1).ok_or_else(too_large)?;
        let crc = crc32fast::hash(data);
        // Version 2.0, no flags beyond UTF-8 names (bit 11), stored, no timestamp (1980-01-01).
        let common = |out: &mut Vec<u8>| {
            out.extend_from_slice(&20u16.to_le_bytes());
            out.extend_from_slice(&(1u16 << 11).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(&0x21u16.to_le_bytes());
            out.extend_from_slice(&crc.to_le_bytes());
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&name_len.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
        };
        let mut local = Vec::with_capacity(30 + name.len());
        local.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        common(&mut local);
        local.extend_from_slice(name.as_bytes());
        self.central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        // Made by Unix (3), so the external attributes below are a Unix mode.
        self.central.extend_from_slice(&((3u16 << 8) | 20).to_le_bytes());
        common(&mut self.central);
        // Comment length, disk number and internal attributes; external attributes; where the entry starts.
        self.central.extend_from_slice(&[0; 6]);
        self.central.extend_from_slice(&0o100644u32.wrapping_shl(16).to_le_bytes());
        self.central.extend_from_slice(&self.offset.to_le_bytes());
        self.central.extend_from_slice(name.as_bytes());
        self.out.write_all(&local)?;
        self.out.write_all(data)?;
        let written = u32::try_from(local.len() + data.len()).map_err(|_| too_large())?;
        self.offset = self.offset.checked_add(written).ok_or_else(too_large)?;
        Ok(())
    }

    /// Writes the central directory and its end record; returns the writer.
    pub fn finish(mut self) -> Result<W, ZipError> {
        let central_len = u32::try_from(self.central.len()).map_err(|_| ZipError::TooLarge("the directory".into()))?;
        self.out.write_all(&self.central)?;
        let mut end = Vec::with_capacity(22);
        end.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
        end.extend_from_slice(&[0; 4]);
        end.extend_from_slice(&self.entries.to_le_bytes());
        end.extend_from_slice(&self.entries.to_le_bytes());
        end.extend_from_slice(&central_len.to_le_bytes());
        end.extend_from_slice(&self.offset.to_le_bytes());
        end.extend_from_slice(&0u16.to_le_bytes());
        self.out.write_all(&end)?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The archive is what Python's zipfile (a reader independent of this code) reads back byte for byte, CRCs
    /// checked, and its records are where the format puts them.
    #[test]
    fn an_independent_reader_reads_back_every_entry() {
        let mut zip = ZipWriter::new(Vec::new());
        zip.add("a.json", br#"{"x":1}"#).unwrap();
        zip.add("node/metrics.txt", b"kv_ops 1\n").unwrap();
        zip.add("empty", b"").unwrap();
        let bytes = zip.finish().unwrap();
        assert_eq!(&bytes[..4], b"PK\x03\x04");
        assert_eq!(&bytes[bytes.len() - 22..bytes.len() - 18], b"PK\x05\x06");
        assert_eq!(u16::from_le_bytes([bytes[bytes.len() - 12], bytes[bytes.len() - 11]]), 3);
        let path = std::env::temp_dir().join(format!("settee-zip-test-{}.zip", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let script = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nassert z.testzip() is None\n\
                      print(';'.join(n + '=' + z.read(n).decode() for n in z.namelist()), end='')";
        let out = std::process::Command::new("python3").arg("-c").arg(script).arg(&path).output();
        let _ = std::fs::remove_file(&path);
        let out = out.expect("python3 runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a.json={\"x\":1};node/metrics.txt=kv_ops 1\n;empty=");
    }
}
