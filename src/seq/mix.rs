//! SplitMix64's finaliser, the mixing of the cache's hashes (sets, tags, the table of databases)
//! and of text keys.

/// SplitMix64's finaliser: spreads every input bit over the output.
pub fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
