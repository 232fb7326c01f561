//! Per-process randomness from a CSPRNG (ChaCha, seeded from the OS).
//!
//! Seeded lazily in each backend, never in the postmaster: a generator seeded before fork would
//! give every backend the same stream.

use std::cell::RefCell;

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

thread_local! {
    static RNG: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

fn with_rng<T>(f: impl FnOnce(&mut StdRng) -> T) -> T {
    RNG.with(|rng| f(rng.borrow_mut().get_or_insert_with(StdRng::from_entropy)))
}

/// A uniform number in `0..bound` (0 when `bound` is 0).
pub fn below(bound: u64) -> u64 {
    if bound <= 1 {
        return 0;
    }
    with_rng(|rng| rng.gen_range(0..bound))
}

pub fn fill(bytes: &mut [u8]) {
    with_rng(|rng| rng.fill_bytes(bytes))
}

/// Fresh bytes straight from the operating system, for values chosen once per server start
/// (in the postmaster, where no per-process generator may be seeded) and for secrets that are
/// kept (a space's, for its text keys).
pub fn os_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes
}
