//! Crockford's base32 (<https://www.crockford.com/base32.html>), as ULID writes UUIDs: a fixed
//! number of digits from `0123456789ABCDEFGHJKMNPQRSTVWXYZ`, most significant first, the value
//! padded with zero bits on the left. The alphabet is in ASCII order, so at a fixed width the
//! text sorts (byte-wise, as `COLLATE "C"` does) like the value. Pure: no PostgreSQL.

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Why a text is not the base32 form of a value of some width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base32Error {
    /// The text has `.0` characters instead of the width's digits.
    Length(usize),
    /// Character `.1` (counted from 1) is `.0`, not a Crockford digit.
    Digit(char, usize),
    /// The value is wider than the width's bits (the first digit is too large).
    Overflow,
}

/// A width: how many bits a value has and how many digits write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Width {
    pub bits: u32,
    pub digits: usize,
}

impl Width {
    /// The width of a value of `bits` bits: as few digits as hold them.
    pub const fn of_bits(bits: u32) -> Width {
        Width { bits, digits: bits.div_ceil(5) as usize }
    }

    /// The `digits` digits of `value`, which must fit in `bits`.
    ///
    /// ```
    /// use pg_idgen::base32::Width;
    /// let uuid = Width::of_bits(128);
    /// assert_eq!(uuid.encode(0x0191_2C4B_6D7E_7F00_8000_0000_0000_0001), "01J4P4PVBYFW08000000000001");
    /// assert_eq!(uuid.decode("01j4p4pvbyfw0800000000000i"), Ok(0x0191_2C4B_6D7E_7F00_8000_0000_0000_0001));
    /// ```
    pub fn encode(self, value: u128) -> String {
        debug_assert!(self.bits == 128 || value >> self.bits == 0);
        (0..self.digits).rev().map(|i| ALPHABET[(value >> (5 * i) & 31) as usize] as char).collect()
    }

    /// The value `text` writes: exactly `digits` digits, either case; `I` and `L` read as 1 and
    /// `O` as 0, as Crockford says. No hyphens, no check symbol.
    pub fn decode(self, text: &str) -> Result<u128, Base32Error> {
        let count = text.chars().count();
        if count != self.digits {
            return Err(Base32Error::Length(count));
        }
        // The first digit carries what is left of the bits after the others' five each.
        let first_bits = self.bits - 5 * (self.digits as u32 - 1);
        let mut value = 0u128;
        for (position, ch) in text.chars().enumerate() {
            let digit = digit_of(ch).ok_or(Base32Error::Digit(ch, position + 1))?;
            if position == 0 && digit >> first_bits != 0 {
                return Err(Base32Error::Overflow);
            }
            value = value << 5 | digit as u128;
        }
        Ok(value)
    }
}

fn digit_of(ch: char) -> Option<u8> {
    let upper = match ch.to_ascii_uppercase() {
        'I' | 'L' => '1',
        'O' => '0',
        other => other,
    };
    ALPHABET.iter().position(|&c| c as char == upper).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::{Base32Error, Width};

    #[test]
    fn values_round_trip_at_every_width_and_keep_their_order() {
        for bits in [63, 96, 128] {
            let width = Width::of_bits(bits);
            let max = if bits == 128 { u128::MAX } else { (1u128 << bits) - 1 };
            let values = [0, 1, 31, 32, 0xDEAD_BEEF, max / 3, max - 1, max];
            let texts: Vec<String> = values.iter().map(|&v| width.encode(v)).collect();
            for (&value, text) in values.iter().zip(&texts) {
                assert_eq!(text.len(), width.digits);
                assert_eq!(width.decode(text), Ok(value), "{bits} bits: {text}");
                assert_eq!(width.decode(&text.to_lowercase()), Ok(value));
            }
            assert!(texts.windows(2).all(|w| w[0] < w[1]), "{bits} bits: text order is value order");
        }
        assert_eq!(Width::of_bits(128).digits, 26);
        assert_eq!(Width::of_bits(96).digits, 20);
        assert_eq!(Width::of_bits(63).digits, 13);
    }

    #[test]
    fn malformed_text_says_what_is_wrong() {
        let width = Width::of_bits(63);
        assert_eq!(width.decode("7ZZZZZZZZZZZZ"), Ok(i64::MAX as u128));
        assert_eq!(width.decode("8000000000000"), Err(Base32Error::Overflow), "2^63 does not fit");
        assert_eq!(width.decode("000000000000"), Err(Base32Error::Length(12)));
        assert_eq!(width.decode("00000000000000"), Err(Base32Error::Length(14)));
        assert_eq!(width.decode("000000U000000"), Err(Base32Error::Digit('U', 7)), "U is not a digit");
        assert_eq!(width.decode("000000-000000"), Err(Base32Error::Digit('-', 7)));
        assert_eq!(width.decode("00000000000é0"), Err(Base32Error::Digit('é', 12)));
        assert_eq!(width.decode("0000000000OIL"), Ok(0b00001_00001), "O, I and L read as 0, 1 and 1");
        assert_eq!(Width::of_bits(96).decode("20000000000000000000"), Err(Base32Error::Overflow));
    }
}
