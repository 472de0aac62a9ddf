//! Deterministic mutation fuzzing shared by the DHCPv4 and DHCPv6 packet
//! tests: a fixed xorshift64* sequence (so a failure reproduces) and the
//! byte edits both apply to seed packets.

/// xorshift64* with a caller-chosen seed and multiplier (each test keeps
/// the sequence it was written with).
pub(crate) struct XorShift {
    state: u64,
    mul: u64,
}

impl XorShift {
    pub(crate) fn new(seed: u64, mul: u64) -> Self {
        XorShift { state: seed, mul }
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(self.mul)
    }
}

/// Applies 0–7 random edits to `p`: overwrite a byte, truncate, append
/// junk, set an option length byte, insert a byte; stops when `p` is
/// empty. `length_byte(at, r)` gives the value for the byte after `at`
/// (`None`: that edit becomes an insert), the one edit the two protocols
/// differ in.
pub(crate) fn mutate(
    p: &mut Vec<u8>,
    rng: &mut XorShift,
    length_byte: impl Fn(usize, u64) -> Option<u8>,
) {
    for _ in 0..(rng.next() % 8) {
        let r = rng.next();
        let at = (r >> 8) as usize % p.len().max(1);
        let len = if r % 5 == 3 && at + 1 < p.len() {
            length_byte(at, r)
        } else {
            None
        };
        match (r % 5, len) {
            (0, _) => p[at] = (r >> 32) as u8,
            (1, _) => p.truncate(at),
            (2, _) => p.extend((0..(r >> 40) % 64).map(|i| (r >> (i % 56)) as u8)),
            (3, Some(b)) => p[at + 1] = b,
            _ => p.insert(at.min(p.len()), (r >> 16) as u8),
        }
        if p.is_empty() {
            break;
        }
    }
}
