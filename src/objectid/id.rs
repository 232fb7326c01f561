//! An ObjectId's bytes (current BSON spec), big-endian:
//! `| 4 bytes: Unix seconds | 5 bytes: random, once per server start | 3 bytes: counter |`.
//! Pure: no PostgreSQL, no shared memory.

pub const OBJECTID_LEN: usize = 12;

/// A 12-byte ObjectId. Its byte order is its sort order, as in MongoDB.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId(pub [u8; OBJECTID_LEN]);

impl ObjectId {
    pub fn from_parts(seconds: u32, random: [u8; 5], counter: u32) -> ObjectId {
        let mut bytes = [0u8; OBJECTID_LEN];
        bytes[0..4].copy_from_slice(&seconds.to_be_bytes());
        bytes[4..9].copy_from_slice(&random);
        bytes[9..12].copy_from_slice(&counter.to_be_bytes()[1..4]);
        ObjectId(bytes)
    }

    /// 24 hexadecimal digits, either case.
    ///
    /// ```
    /// use pg_idgen::objectid::ObjectId;
    /// let id = ObjectId::parse("65678901AABBCCDDEE001122").unwrap();
    /// assert_eq!((id.seconds(), id.counter()), (0x6567_8901, 0x001122));
    /// assert_eq!(id.to_hex(), "65678901aabbccddee001122");
    /// assert_eq!(ObjectId::parse("6567890"), None);
    /// ```
    pub fn parse(text: &str) -> Option<ObjectId> {
        let text = text.as_bytes();
        if text.len() != 2 * OBJECTID_LEN {
            return None;
        }
        let mut bytes = [0u8; OBJECTID_LEN];
        for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
            let high = (pair[0] as char).to_digit(16)?;
            let low = (pair[1] as char).to_digit(16)?;
            *byte = (high * 16 + low) as u8;
        }
        Some(ObjectId(bytes))
    }

    /// 24 lowercase hexadecimal digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn seconds(&self) -> u32 {
        u32::from_be_bytes(self.0[0..4].try_into().unwrap())
    }

    pub fn random(&self) -> &[u8] {
        &self.0[4..9]
    }

    pub fn counter(&self) -> u32 {
        u32::from_be_bytes([0, self.0[9], self.0[10], self.0[11]])
    }
}

#[cfg(test)]
mod tests {
    use super::ObjectId;

    #[test]
    fn parts_and_hex_round_trip() {
        let id = ObjectId::from_parts(0x6567_8901, [1, 2, 3, 4, 5], 0xABCDEF);
        assert_eq!(id.to_hex(), "65678901".to_string() + "0102030405" + "abcdef");
        assert_eq!(ObjectId::parse(&id.to_hex().to_uppercase()), Some(id));
        assert_eq!((id.seconds(), id.random(), id.counter()), (0x6567_8901, &[1u8, 2, 3, 4, 5][..], 0xABCDEF));
        assert_eq!(ObjectId::parse("6567890101020304050abcdef"), None, "25 digits");
        assert_eq!(ObjectId::parse("65678901010203040abcdeg0"), None, "not hex");
        assert_eq!(ObjectId::parse(""), None);
    }
}
