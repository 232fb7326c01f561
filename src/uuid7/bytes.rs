//! A UUID's bytes: the v7 layout of RFC 9562 (big-endian, 128 bits)
//! `| 48: Unix ms | 4: version 0111 | 12: counter (rand_a) | 2: variant 10 | 62: random (rand_b) |`,
//! and the time any time-based version carries. Pure: no PostgreSQL, no shared memory.

/// The bytes of a v7 UUID with the given ms, counter and 62 bits of rand_b (the top two are
/// replaced by the variant).
///
/// ```
/// let bytes = pg_idgen::uuid7::from_parts(0x017F_22E2_79B0, 0xCC3, 0);
/// assert_eq!(bytes[..8], [0x01, 0x7F, 0x22, 0xE2, 0x79, 0xB0, 0x7C, 0xC3]); // ms, version 7, counter
/// assert_eq!(bytes[8] >> 6, 0b10); // the variant
/// ```
pub fn from_parts(ms: u64, counter: u16, rand_b: u64) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[0..6].copy_from_slice(&ms.to_be_bytes()[2..8]);
    let version_and_counter = 0x7000 | (counter & 0x0FFF);
    bytes[6..8].copy_from_slice(&version_and_counter.to_be_bytes());
    let variant_and_random = (rand_b & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    bytes[8..16].copy_from_slice(&variant_and_random.to_be_bytes());
    bytes
}

/// The time, version and sequence of a UUID: RFC 9562 versions 1, 6 and 7 carry a time; others
/// decode to their version and NULLs.
pub fn parts_of_any(bytes: &[u8; 16]) -> (Option<i64>, i32, Option<i32>) {
    let version = (bytes[6] >> 4) as i32;
    let rfc_variant = bytes[8] >> 6 == 0b10;
    let be = |range: std::ops::Range<usize>| range.fold(0u64, |acc, i| acc << 8 | bytes[i] as u64);
    // Versions 1 and 6 count 100 ns since 1582-10-15, the Gregorian reform.
    const GREGORIAN_TO_UNIX_100NS: i64 = 0x01B2_1DD2_1381_4000;
    let clock_sequence = (be(8..10) & 0x3FFF) as i32;
    match (rfc_variant, version) {
        (true, 7) => (Some(be(0..6) as i64 * 1000), 7, Some((be(6..8) & 0x0FFF) as i32)),
        (true, 1) => {
            let ticks = (be(6..8) & 0x0FFF) << 48 | be(4..6) << 32 | be(0..4);
            (Some((ticks as i64 - GREGORIAN_TO_UNIX_100NS) / 10), 1, Some(clock_sequence))
        }
        (true, 6) => {
            let ticks = be(0..6) << 12 | (be(6..8) & 0x0FFF);
            (Some((ticks as i64 - GREGORIAN_TO_UNIX_100NS) / 10), 6, Some(clock_sequence))
        }
        _ => (None, version, None),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parts_land_where_rfc_9562_puts_them() {
        let bytes = super::from_parts(0x0123_4567_89AB, 0xCDE, u64::MAX);
        assert_eq!(bytes[0..6], [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB], "48-bit ms, big-endian");
        assert_eq!(bytes[6], 0x7C, "version 7, then the counter's high nibble");
        assert_eq!(bytes[7], 0xDE);
        assert_eq!(bytes[8] >> 6, 0b10, "variant 10");
        assert_eq!(bytes[8] & 0x3F, 0x3F);
    }

    #[test]
    fn versions_1_6_and_7_carry_a_time_and_others_do_not() {
        let v7 = super::from_parts(1_000, 5, 0);
        assert_eq!(super::parts_of_any(&v7), (Some(1_000_000), 7, Some(5)));
        // RFC 9562's version 1 and 6 examples: 2022-02-22 19:22:22 UTC.
        let v1 = [0xC2, 0x32, 0xAB, 0x00, 0x94, 0x14, 0x11, 0xEC, 0xB3, 0xC8, 0x9F, 0x6B, 0xDE, 0xCE, 0xD8, 0x46];
        let v6 = [0x1E, 0xC9, 0x41, 0x4C, 0x23, 0x2A, 0x6B, 0x00, 0xB3, 0xC8, 0x9F, 0x6B, 0xDE, 0xCE, 0xD8, 0x46];
        assert_eq!(super::parts_of_any(&v1).0, Some(1_645_557_742_000_000));
        assert_eq!(super::parts_of_any(&v6).0, Some(1_645_557_742_000_000));
        let v4 = [0xA0, 0xEE, 0xBC, 0x99, 0x9C, 0x0B, 0x4E, 0xF8, 0xBB, 0x6D, 0x6B, 0xB9, 0xBD, 0x38, 0x0A, 0x11];
        assert_eq!(super::parts_of_any(&v4), (None, 4, None));
    }
}
