//! A UUID's bytes, built and read with the `uuid` crate: the v7 layout of RFC 9562 (big-endian,
//! 128 bits) `| 48: Unix ms | 4: version 0111 | 12: counter (rand_a) | 2: variant 10 | 62: random (rand_b) |`,
//! and the time that versions 1, 6 and 7 carry. Pure: no PostgreSQL, no shared memory.

use uuid::timestamp::UUID_TICKS_BETWEEN_EPOCHS;
use uuid::{Builder, Uuid, Variant, Version};

/// The bytes of a v7 UUID with the given ms (its low 48 bits), the counter in rand_a (its low
/// 12 bits), and `rand_b` (its top two bits give way to the variant).
///
/// ```
/// let bytes = pg_idgen::uuid7::from_parts(0x017F_22E2_79B0, 0xCC3, [0; 8]);
/// assert_eq!(bytes[..8], [0x01, 0x7F, 0x22, 0xE2, 0x79, 0xB0, 0x7C, 0xC3]); // ms, version 7, counter
/// assert_eq!(bytes[8] >> 6, 0b10); // the variant
/// ```
#[inline]
pub fn from_parts(ms: u64, counter: u16, rand_b: [u8; 8]) -> [u8; 16] {
    // Why the fields in place and the crate's version and variant over them, not the crate's
    // `Builder::from_unix_timestamp_millis`: that one assembles the bytes one by one, which costs
    // every uuid_v7_next() call more (docs/benchmarks.md).
    let mut bytes = [0u8; 16];
    bytes[0..6].copy_from_slice(&ms.to_be_bytes()[2..8]);
    bytes[6..8].copy_from_slice(&counter.to_be_bytes());
    bytes[8..16].copy_from_slice(&rand_b);
    Builder::from_bytes(bytes).with_version(Version::SortRand).with_variant(Variant::RFC4122).into_uuid().into_bytes()
}

/// The ms and the counter (rand_a) of a version 7 UUID of RFC 9562's variant; None for any other.
///
/// ```
/// let bytes = pg_idgen::uuid7::from_parts(1_645_557_742_000, 0xCC3, [0xFF; 8]);
/// assert_eq!(pg_idgen::uuid7::v7_parts(&bytes), Some((1_645_557_742_000, 0xCC3)));
/// assert_eq!(pg_idgen::uuid7::v7_parts(&[0; 16]), None); // the nil UUID
/// ```
pub fn v7_parts(bytes: &[u8; 16]) -> Option<(u64, u16)> {
    let uuid = Uuid::from_bytes(*bytes);
    if uuid.get_version() != Some(Version::SortRand) || uuid.get_variant() != Variant::RFC4122 {
        return None;
    }
    let (seconds, nanos) = uuid.get_timestamp()?.to_unix();
    // Why the fields: the crate reads a v7's rand_a as random, and has no getter for it.
    let (_, _, version_and_rand_a, _) = uuid.as_fields();
    Some((seconds * 1000 + (nanos / 1_000_000) as u64, version_and_rand_a & 0x0FFF))
}

/// The time (Unix µs), version and sequence of a UUID: versions 7 (the sequence is its counter), 1
/// and 6 (the clock sequence) of RFC 9562's variant carry a time; others decode to their version
/// and NULLs.
pub fn parts_of_any(bytes: &[u8; 16]) -> (Option<i64>, i32, Option<i32>) {
    if let Some((ms, counter)) = v7_parts(bytes) {
        return (Some(ms as i64 * 1000), 7, Some(counter as i32));
    }
    let uuid = Uuid::from_bytes(*bytes);
    let version = uuid.get_version_num() as i32;
    // Of the variant, the crate gives the time of versions 1 and 6 only (7 was read above).
    match uuid.get_timestamp().filter(|_| uuid.get_variant() == Variant::RFC4122) {
        Some(timestamp) => {
            // Why the crate's Gregorian ticks (100 ns since 1582-10-15) and not its Unix time: a
            // time before 1970 would wrap around in the latter.
            let (ticks, clock_sequence) = timestamp.to_gregorian();
            let unix_us = (ticks as i64 - UUID_TICKS_BETWEEN_EPOCHS as i64) / 10;
            (Some(unix_us), version, Some(clock_sequence as i32))
        }
        None => (None, version, None),
    }
}

#[cfg(test)]
mod tests {
    use super::{from_parts, parts_of_any, v7_parts};

    #[test]
    fn parts_land_where_rfc_9562_puts_them() {
        let bytes = from_parts(0x0123_4567_89AB, 0xCDE, [0xFF; 8]);
        assert_eq!(bytes[0..6], [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB], "48-bit ms, big-endian");
        assert_eq!(bytes[6], 0x7C, "version 7, then the counter's high nibble");
        assert_eq!(bytes[7], 0xDE);
        assert_eq!(bytes[8] >> 6, 0b10, "variant 10");
        assert_eq!(bytes[8] & 0x3F, 0x3F);
        assert_eq!(bytes[9..16], [0xFF; 7], "rand_b");
        assert_eq!(from_parts(1, 0xF123, [0; 8])[6..8], [0x71, 0x23], "only the counter's low 12 bits");
    }

    // RFC 9562's examples (appendix A): 2022-02-22 19:22:22 UTC = 1,645,557,742 s since 1970.
    const V1: [u8; 16] = [0xC2, 0x32, 0xAB, 0x00, 0x94, 0x14, 0x11, 0xEC, 0xB3, 0xC8, 0x9F, 0x6B, 0xDE, 0xCE, 0xD8, 0x46];
    const V6: [u8; 16] = [0x1E, 0xC9, 0x41, 0x4C, 0x23, 0x2A, 0x6B, 0x00, 0xB3, 0xC8, 0x9F, 0x6B, 0xDE, 0xCE, 0xD8, 0x46];
    const V7: [u8; 16] = [0x01, 0x7F, 0x22, 0xE2, 0x79, 0xB0, 0x7C, 0xC3, 0x98, 0xC4, 0xDC, 0x0C, 0x0C, 0x07, 0x39, 0x8F];
    const V4: [u8; 16] = [0x91, 0x91, 0x08, 0xF7, 0x52, 0xD1, 0x43, 0x20, 0x9B, 0xAC, 0xF8, 0x47, 0xDB, 0x41, 0x48, 0xA8];

    #[test]
    fn rfc_9562_examples_of_versions_1_6_and_7_decode_to_their_time_and_sequence() {
        // Versions 1 and 6 carry the clock sequence 0x33C8 (bytes 8-9 without the variant).
        assert_eq!(parts_of_any(&V1), (Some(1_645_557_742_000_000), 1, Some(0x33C8)));
        assert_eq!(parts_of_any(&V6), (Some(1_645_557_742_000_000), 6, Some(0x33C8)));
        // Version 7: the ms 0x017F22E279B0, and rand_a 0xCC3 as the sequence.
        assert_eq!(parts_of_any(&V7), (Some(1_645_557_742_000_000), 7, Some(0xCC3)));
        assert_eq!(v7_parts(&V7), Some((0x017F_22E2_79B0, 0xCC3)));
        assert_eq!(from_parts(0x017F_22E2_79B0, 0xCC3, V7[8..16].try_into().unwrap()), V7, "and built back from them");
    }

    #[test]
    fn other_versions_and_variants_carry_no_time() {
        assert_eq!(parts_of_any(&V4), (None, 4, None), "RFC 9562's version 4 example");
        assert_eq!(v7_parts(&V4), None);
        assert_eq!(parts_of_any(&[0; 16]), (None, 0, None), "the nil UUID");
        assert_eq!(parts_of_any(&[0xFF; 16]), (None, 15, None), "the max UUID");
        // A v7 and a v1 with the variant bits 11 instead of 10 are not of RFC 9562's variant.
        let mut other_variant = V7;
        other_variant[8] |= 0xC0;
        assert_eq!((parts_of_any(&other_variant), v7_parts(&other_variant)), ((None, 7, None), None));
        let mut other_variant = V1;
        other_variant[8] |= 0xC0;
        assert_eq!(parts_of_any(&other_variant), (None, 1, None));
    }

    #[test]
    fn a_version_1_time_before_1970_stays_before_1970() {
        // 1582-10-15 itself: ticks 0, 12,219,292,800 s before the Unix epoch.
        let mut v1 = V1;
        v1[0..8].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0x10, 0]);
        assert_eq!(parts_of_any(&v1).0, Some(-12_219_292_800_000_000));
    }
}
