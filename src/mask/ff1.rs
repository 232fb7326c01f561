//! FF1 (NIST SP 800-38G, section 5.1) over AES, for the small domains public numbers need: a
//! radix from 2 to 2^16 and a length n whose halves each hold fewer than 2^64 values. Pure: no
//! PostgreSQL.
//!
//! Why not the `fpe` crate on the hot path: it computes with `BigUint`s, allocates on every
//! round and starts the PRF (and the AES key schedule's copy) anew for every call. Here numbers
//! are `u128`s, and what does not depend on the input — the PRF's chaining value over
//! P ‖ T ‖ 0^pad, and the bytes of the last block before [i] ‖ NUM(B) — is computed once per
//! key, radix, length and tweak (`Domain::new`), so that a call costs ten AES blocks and some
//! additions. The tests check it against `fpe` over many random inputs and against NIST's
//! sample vectors.

use aes::cipher::{generic_array::GenericArray, BlockEncrypt, KeyInit};
use aes::{Aes128, Aes192, Aes256};

/// AES with a key of 16, 24 or 32 bytes, its key schedule expanded once.
#[derive(Clone)]
pub enum Cipher {
    Aes128(Aes128),
    Aes192(Aes192),
    Aes256(Aes256),
}

impl Cipher {
    /// The cipher of `key`, or None when it is not 16, 24 or 32 bytes long.
    pub fn new(key: &[u8]) -> Option<Cipher> {
        Some(match key.len() {
            16 => Cipher::Aes128(Aes128::new(GenericArray::from_slice(key))),
            24 => Cipher::Aes192(Aes192::new(GenericArray::from_slice(key))),
            32 => Cipher::Aes256(Aes256::new(GenericArray::from_slice(key))),
            _ => return None,
        })
    }

    /// Encrypts one block in place.
    #[inline]
    pub fn encrypt(&self, block: &mut [u8; 16]) {
        let block = GenericArray::from_mut_slice(block);
        match self {
            Cipher::Aes128(aes) => aes.encrypt_block(block),
            Cipher::Aes192(aes) => aes.encrypt_block(block),
            Cipher::Aes256(aes) => aes.encrypt_block(block),
        }
    }

    /// CBC-MAC with a zero IV over `blocks` (whole blocks), continuing from `chain`.
    pub fn cbc_mac(&self, mut chain: [u8; 16], blocks: &[u8]) -> [u8; 16] {
        debug_assert_eq!(blocks.len() % 16, 0);
        for block in blocks.chunks_exact(16) {
            for (c, b) in chain.iter_mut().zip(block) {
                *c ^= b;
            }
            self.encrypt(&mut chain);
        }
        chain
    }
}

/// Why a radix and length cannot make an FF1 domain here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DomainError {
    /// The radix is not in 2..=2^16.
    Radix,
    /// radix^n is below 1,000,000, the smallest domain FF1 allows.
    TooSmall,
    /// A half of the numeral string holds 2^64 values or more (not supported here).
    TooLarge,
}

/// One FF1 permutation of `0 .. radix^n`: a key, radix, length and tweak, with everything that
/// does not depend on the input computed once.
#[derive(Clone, Debug)]
pub struct Domain {
    radix: u32,
    /// radix^u and radix^v (each below 2^64).
    modulus_u: u128,
    modulus_v: u128,
    /// Bytes of NUM(B) in the PRF's input (step 3), and of S used (step 4).
    b: usize,
    d: usize,
    /// CBC-MAC of P ‖ T ‖ 0^pad up to the PRF input's last block.
    chain: [u8; 16],
    /// The last block's first 15 - b bytes (the end of T ‖ 0^pad); [i] ‖ NUM(B) follow.
    last_block: [u8; 16],
}

impl Domain {
    /// The permutation of `0 .. radix^n` under `cipher` with `tweak`.
    pub fn new(cipher: &Cipher, radix: u32, n: u32, tweak: &[u8]) -> Result<Domain, DomainError> {
        if !(2..=1 << 16).contains(&radix) {
            return Err(DomainError::Radix);
        }
        let (u, v) = (n / 2, n - n / 2);
        let power = |exponent: u32| (radix as u128).checked_pow(exponent).filter(|&p| p < 1 << 64);
        let (modulus_u, modulus_v) = match (power(u), power(v)) {
            (Some(mu), Some(mv)) => (mu, mv),
            _ => return Err(DomainError::TooLarge),
        };
        if modulus_u * modulus_v < 1_000_000 {
            return Err(DomainError::TooSmall);
        }
        // 3. b = ceil(ceil(v * log2(radix)) / 8): ceil(v * log2(radix)) is the bit length of radix^v - 1.
        let bits = 128 - (modulus_v - 1).leading_zeros() as usize;
        let b = bits.div_ceil(8);
        // 4. d = 4 * ceil(b / 4) + 4.
        let d = 4 * b.div_ceil(4) + 4;
        // 5. P = [1, 2, 1] ‖ [radix]^3 ‖ [10] ‖ [u mod 256] ‖ [n]^4 ‖ [t]^4.
        let mut prefix = Vec::with_capacity(32 + tweak.len());
        prefix.extend_from_slice(&[1, 2, 1]);
        prefix.extend_from_slice(&radix.to_be_bytes()[1..]);
        prefix.extend_from_slice(&[10, (u % 256) as u8]);
        prefix.extend_from_slice(&n.to_be_bytes());
        prefix.extend_from_slice(&(tweak.len() as u32).to_be_bytes());
        // 6i. Q = T ‖ [0]^((-t-b-1) mod 16) ‖ [i] ‖ [NUM(B)]^b: P ‖ Q is whole blocks.
        prefix.extend_from_slice(tweak);
        let pad = (16 - (tweak.len() + b + 1) % 16) % 16;
        prefix.resize(prefix.len() + pad, 0);
        let whole = prefix.len() + 1 + b - 16;
        let chain = cipher.cbc_mac([0; 16], &prefix[..whole]);
        let mut last_block = [0u8; 16];
        last_block[..15 - b].copy_from_slice(&prefix[whole..]);
        Ok(Domain { radix, modulus_u, modulus_v, b, d, chain, last_block })
    }

    /// How many values the domain has: radix^n.
    pub fn size(&self) -> u128 {
        self.modulus_u * self.modulus_v
    }

    /// y = NUM(S) of round `i` for the half `half` (6ii to 6iv).
    #[inline]
    fn round_value(&self, cipher: &Cipher, i: u8, half: u64) -> u128 {
        let mut block = self.last_block;
        block[15 - self.b] = i;
        block[16 - self.b..].copy_from_slice(&half.to_be_bytes()[8 - self.b..]);
        for (x, c) in block.iter_mut().zip(&self.chain) {
            *x ^= c;
        }
        cipher.encrypt(&mut block);
        let mut s = [0u8; 16];
        s[16 - self.d..].copy_from_slice(&block[..self.d]);
        u128::from_be_bytes(s)
    }

    /// `value mod modulus`, by a mask when the radix is a power of two.
    #[inline]
    fn reduce(&self, value: u128, modulus: u128) -> u128 {
        if self.radix.is_power_of_two() {
            value & (modulus - 1)
        } else {
            value % modulus
        }
    }

    /// Algorithm 7: the image of `x`, which must be below `size()`.
    pub fn encrypt(&self, cipher: &Cipher, x: u128) -> u128 {
        debug_assert!(x < self.size());
        let (mut a, mut b) = (x / self.modulus_v, x % self.modulus_v);
        for i in 0..10u8 {
            let modulus = if i % 2 == 0 { self.modulus_u } else { self.modulus_v };
            let y = self.reduce(self.round_value(cipher, i, b as u64), modulus);
            let c = self.reduce(a + y, modulus);
            a = b;
            b = c;
        }
        a * self.modulus_v + b
    }

    /// Algorithm 8: the inverse of `encrypt`.
    pub fn decrypt(&self, cipher: &Cipher, x: u128) -> u128 {
        debug_assert!(x < self.size());
        let (mut a, mut b) = (x / self.modulus_v, x % self.modulus_v);
        for i in (0..10u8).rev() {
            let modulus = if i % 2 == 0 { self.modulus_u } else { self.modulus_v };
            let y = self.reduce(self.round_value(cipher, i, a as u64), modulus);
            let c = self.reduce(b + modulus - y, modulus);
            b = a;
            a = c;
        }
        a * self.modulus_v + b
    }
}

#[cfg(test)]
mod tests {
    use super::{Cipher, Domain, DomainError};
    use fpe::ff1::{FlexibleNumeralString, FF1};
    use rand::{Rng, RngCore, SeedableRng};

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
    }

    fn numerals(text: &str, radix: u32) -> Vec<u16> {
        text.chars().map(|c| c.to_digit(radix).unwrap() as u16).collect()
    }

    /// The n numerals of `x` in `radix`, most significant first.
    fn numerals_of(x: u128, radix: u32, n: u32) -> Vec<u16> {
        (0..n).rev().map(|k| (x / (radix as u128).pow(k) % radix as u128) as u16).collect()
    }

    fn value_of(numerals: &[u16], radix: u32) -> u128 {
        numerals.iter().fold(0u128, |acc, &digit| acc * radix as u128 + digit as u128)
    }

    /// NIST SP 800-38G's FF1 samples (FF1samples.pdf): key, radix, tweak, plaintext, ciphertext.
    pub const NIST_SAMPLES: [(&str, u32, &str, &str, &str); 9] = [
        ("2B7E151628AED2A6ABF7158809CF4F3C", 10, "", "0123456789", "2433477484"),
        ("2B7E151628AED2A6ABF7158809CF4F3C", 10, "39383736353433323130", "0123456789", "6124200773"),
        ("2B7E151628AED2A6ABF7158809CF4F3C", 36, "3737373770717273373737", "0123456789abcdefghi", "a9tv40mll9kdu509eum"),
        ("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F", 10, "", "0123456789", "2830668132"),
        ("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F", 10, "39383736353433323130", "0123456789", "2496655549"),
        ("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F", 36, "3737373770717273373737", "0123456789abcdefghi", "xbj3kv35jrawxv32ysr"),
        ("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94", 10, "", "0123456789", "6657667009"),
        ("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94", 10, "39383736353433323130", "0123456789", "1001623463"),
        (
            "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94",
            36,
            "3737373770717273373737",
            "0123456789abcdefghi",
            "xs8a0azh2avyalyzuwd",
        ),
    ];

    #[test]
    fn nist_samples_encrypt_and_decrypt() {
        for (number, (key, radix, tweak, plain, cipher_text)) in NIST_SAMPLES.iter().enumerate() {
            let cipher = Cipher::new(&hex(key)).unwrap();
            let domain = Domain::new(&cipher, *radix, plain.len() as u32, &hex(tweak)).unwrap();
            let x = value_of(&numerals(plain, *radix), *radix);
            let y = domain.encrypt(&cipher, x);
            assert_eq!(numerals_of(y, *radix, plain.len() as u32), numerals(cipher_text, *radix), "sample {}", number + 1);
            assert_eq!(domain.decrypt(&cipher, y), x, "sample {}", number + 1);
        }
    }

    /// The same permutation as the `fpe` crate's FF1, for every radix and length public numbers
    /// use and others, random keys of each size, random tweaks (empty to 70 bytes), random inputs.
    #[test]
    fn agrees_with_the_fpe_crate() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x05ee_dff1);
        let shapes: &[(u32, u32)] =
            &[(2, 63), (2, 20), (2, 64), (2, 125), (10, 6), (10, 9), (10, 19), (10, 7), (36, 19), (32, 13), (7, 40), (65536, 2)];
        for &(radix, n) in shapes {
            for round in 0..60 {
                let key_len = [16, 24, 32][round % 3];
                let mut key = vec![0u8; key_len];
                rng.fill_bytes(&mut key);
                let mut tweak = vec![0u8; rng.gen_range(0..=70)];
                rng.fill_bytes(&mut tweak);
                let cipher = Cipher::new(&key).unwrap();
                let domain = Domain::new(&cipher, radix, n, &tweak).unwrap();
                let x = rng.gen::<u128>() % domain.size();
                let input = FlexibleNumeralString::from(numerals_of(x, radix, n));
                let expected: Vec<u16> = match key_len {
                    16 => FF1::<aes::Aes128>::new(&key, radix).unwrap().encrypt(&tweak, &input).unwrap().into(),
                    24 => FF1::<aes::Aes192>::new(&key, radix).unwrap().encrypt(&tweak, &input).unwrap().into(),
                    _ => FF1::<aes::Aes256>::new(&key, radix).unwrap().encrypt(&tweak, &input).unwrap().into(),
                };
                let y = domain.encrypt(&cipher, x);
                assert_eq!(numerals_of(y, radix, n), expected, "radix {radix}, n {n}, key of {key_len} bytes, tweak of {} bytes", tweak.len());
                assert_eq!(domain.decrypt(&cipher, y), x);
            }
        }
    }

    #[test]
    fn domains_out_of_range_are_refused() {
        let cipher = Cipher::new(&[7; 32]).unwrap();
        assert_eq!(Domain::new(&cipher, 10, 5, b"").unwrap_err(), DomainError::TooSmall);
        assert_eq!(Domain::new(&cipher, 2, 19, b"").unwrap_err(), DomainError::TooSmall);
        assert!(Domain::new(&cipher, 2, 20, b"").is_ok());
        assert_eq!(Domain::new(&cipher, 10, 40, b"").unwrap_err(), DomainError::TooLarge);
        assert_eq!(Domain::new(&cipher, 1, 40, b"").unwrap_err(), DomainError::Radix);
        assert!(Cipher::new(&[0; 20]).is_none());
    }

    /// A small domain is a permutation: every value has one image, and decrypting gives it back.
    #[test]
    fn a_whole_domain_is_permuted() {
        let cipher = Cipher::new(&[3; 16]).unwrap();
        let domain = Domain::new(&cipher, 2, 20, b"purpose").unwrap();
        let mut seen = vec![false; domain.size() as usize];
        for x in 0..domain.size() {
            let y = domain.encrypt(&cipher, x);
            assert!(!seen[y as usize], "{y} twice");
            seen[y as usize] = true;
            assert_eq!(domain.decrypt(&cipher, y), x);
        }
    }
}
