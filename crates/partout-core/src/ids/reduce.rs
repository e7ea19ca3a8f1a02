//! Range reduction: turning a hash into a destination without a per-row `%`.
//!
//! * [`Modulo`]: exact `x mod n` (and Java's `pmod` of a signed hash), chosen once per
//!   partition count: a mask for powers of two, otherwise Lemire's reciprocal multiply
//!   ("Faster remainder by direct computation", 2019), exact for every 32-bit `x` and `n`.
//! * [`multiply_shift`]: `(h * n) >> 32` on the top 32 bits of a 64-bit hash, the fast
//!   scheme's reduction. Not a modulo, but as uniform as the hash's top bits.

/// Exact remainder by a fixed divisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modulo {
    /// `n` is a power of two: `x & (n - 1)`.
    Mask(u32),
    /// Any other `n`: `((M * x mod 2^64) * n) >> 64` with `M = ceil(2^64 / n)`.
    Reciprocal {
        /// The divisor.
        n: u32,
        /// `u64::MAX / n + 1`.
        m: u64,
    },
}

impl Modulo {
    /// The reducer for `n`.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn new(n: u32) -> Self {
        assert!(n > 0, "a modulo by zero");
        if n.is_power_of_two() {
            Self::Mask(n - 1)
        } else {
            Self::Reciprocal {
                n,
                m: u64::MAX / u64::from(n) + 1,
            }
        }
    }

    /// `x mod n`.
    ///
    /// ```
    /// use partout_core::ids::Modulo;
    /// assert_eq!(Modulo::new(7).reduce(100), 2);
    /// assert_eq!(Modulo::new(8).reduce(100), 4);
    /// ```
    #[inline(always)]
    pub fn reduce(self, x: u32) -> u32 {
        match self {
            Self::Mask(mask) => x & mask,
            Self::Reciprocal { n, m } => {
                let low = m.wrapping_mul(u64::from(x));
                ((u128::from(low) * u128::from(n)) >> 64) as u32
            }
        }
    }

    /// The divisor.
    pub fn divisor(self) -> u32 {
        match self {
            Self::Mask(mask) => mask + 1,
            Self::Reciprocal { n, .. } => n,
        }
    }
}

/// Exact remainder of a 64-bit hash by a fixed 32-bit divisor: DataFusion's `hash % n`.
///
/// A mask for powers of two; otherwise Lemire's direct remainder with a 128-bit reciprocal
/// `M = ceil(2^128 / n)`: `x mod n = ((M * x mod 2^128) * n) >> 128`, exact for every 64-bit
/// `x` (the reciprocal has 128 ≥ 64 + 32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modulo64 {
    /// `n` is a power of two: `x & (n - 1)`.
    Mask(u64),
    /// Any other `n`.
    Reciprocal {
        /// The divisor.
        n: u64,
        /// `u128::MAX / n + 1`.
        m: u128,
    },
}

impl Modulo64 {
    /// The reducer for `n`.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn new(n: u32) -> Self {
        assert!(n > 0, "a modulo by zero");
        let n = u64::from(n);
        if n.is_power_of_two() {
            Self::Mask(n - 1)
        } else {
            Self::Reciprocal {
                n,
                m: u128::MAX / u128::from(n) + 1,
            }
        }
    }

    /// `x mod n`.
    ///
    /// ```
    /// use partout_core::ids::Modulo64;
    /// assert_eq!(Modulo64::new(7).reduce(u64::MAX), (u64::MAX % 7) as u32);
    /// assert_eq!(Modulo64::new(8).reduce(100), 4);
    /// ```
    #[inline(always)]
    pub fn reduce(self, x: u64) -> u32 {
        match self {
            Self::Mask(mask) => (x & mask) as u32,
            Self::Reciprocal { n, m } => {
                let low = m.wrapping_mul(u128::from(x));
                // The top 64 bits of the 192-bit product `low * n`.
                let high = (low >> 64) * u128::from(n);
                let below = ((low & u128::from(u64::MAX)) * u128::from(n)) >> 64;
                ((high + below) >> 64) as u32
            }
        }
    }

    /// `x mod n` for every `x` of `hashes`, appended to `out`.
    pub fn reduce_all(self, hashes: &[u64], out: &mut Vec<u32>) {
        out.extend(hashes.iter().map(|&x| self.reduce(x)));
    }
}

/// Java's `pmod(h, n)` for a signed 32-bit `h`: the non-negative remainder.
///
/// Computed without a sign branch: `h + 2^31` is `h`'s bits with the top one flipped, a
/// non-negative number whose remainder differs from `h`'s by the constant `2^31 mod n`.
#[derive(Debug, Clone, Copy)]
pub struct Pmod {
    modulo: Modulo,
    /// `(n - 2^31 mod n) mod n`: added back after reducing `h + 2^31`.
    correction: u32,
}

impl Pmod {
    /// The reducer for `n`.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn new(n: u32) -> Self {
        let modulo = Modulo::new(n);
        let shift = ((1u64 << 31) % u64::from(n)) as u32;
        Self {
            modulo,
            correction: (n - shift) % n,
        }
    }

    /// `pmod(h, n)`, `h` read as a signed 32-bit integer.
    ///
    /// ```
    /// use partout_core::ids::Pmod;
    /// assert_eq!(Pmod::new(7).reduce(-1i32 as u32), 6);
    /// assert_eq!(Pmod::new(200).reduce(0x99f0149d), 69);
    /// ```
    #[inline(always)]
    pub fn reduce(self, h: u32) -> u32 {
        // In 64 bits: with `n` near `u32::MAX` the sum passes 32 bits.
        let r = u64::from(self.modulo.reduce(h ^ 0x8000_0000)) + u64::from(self.correction);
        let n = u64::from(self.modulo.divisor());
        (if r >= n { r - n } else { r }) as u32
    }
}

impl Pmod {
    /// `pmod(h, n)` for every hash, appended to `out`.
    ///
    /// With AVX2 (detected at run time) and `n <= 2^20`, the quotient comes from
    /// double-precision arithmetic, four lanes at a time: `q = floor(h * (1 / n))` is exact
    /// but when `h / n` is an integer, where it may come out one low (its error, below 2^-21,
    /// is smaller than the 1/n ≥ 2^-20 that separates any other quotient from an integer), and
    /// one compare-and-subtract corrects that case.
    pub fn reduce_all(self, hashes: &[u32], out: &mut Vec<u32>) {
        let n = self.modulo.divisor();
        #[cfg(target_arch = "x86_64")]
        if n <= 1 << 20 && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            unsafe { pmod_f64_avx2(hashes, n, out) };
            return;
        }
        out.extend(hashes.iter().map(|&h| self.reduce(h)));
    }
}

/// `pmod(h, n)` by a floating-point quotient; exact for `n <= 2^20` (see [`Pmod::reduce_all`]).
#[inline(always)]
fn pmod_f64(h: u32, n: i32, inverse: f64) -> u32 {
    let h = h as i32;
    let q = (f64::from(h) * inverse).floor() as i32;
    let mut r = h.wrapping_sub(q.wrapping_mul(n));
    if r >= n {
        r -= n;
    }
    if r < 0 {
        r += n;
    }
    r as u32
}

/// [`pmod_f64`] over a slice, compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn pmod_f64_avx2(hashes: &[u32], n: u32, out: &mut Vec<u32>) {
    let inverse = 1.0 / f64::from(n);
    out.extend(hashes.iter().map(|&h| pmod_f64(h, n as i32, inverse)));
}

/// `(top 32 bits of h) * n >> 32`: a destination below `n` for a 64-bit hash.
///
/// ```
/// use partout_core::ids::multiply_shift;
/// assert_eq!(multiply_shift(u64::MAX, 10), 9);
/// assert_eq!(multiply_shift(0, 10), 0);
/// ```
#[inline(always)]
pub fn multiply_shift(h: u64, n: u32) -> u32 {
    (((h >> 32) * u64::from(n)) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        // Holds no unsafe code; interpreting thousands of cases takes minutes under Miri.
        #[test]
        #[cfg_attr(miri, ignore)]
        fn the_64_bit_modulo_is_the_remainder(x in proptest::prelude::any::<u64>(), n in 1u32..) {
            proptest::prop_assert_eq!(Modulo64::new(n).reduce(x), (x % u64::from(n)) as u32);
        }
    }

    /// Holds no unsafe code, and takes minutes under Miri: run natively only.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn the_64_bit_modulo_is_exact() {
        let mut xs: Vec<u64> = (0..20_000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        xs.extend([
            0,
            1,
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            (1 << 63) - 1,
            u32::MAX as u64,
        ]);
        for n in [
            1u32,
            2,
            3,
            7,
            200,
            999,
            1000,
            1 << 20,
            (1 << 31) + 1,
            u32::MAX - 1,
            u32::MAX,
        ] {
            let modulo = Modulo64::new(n);
            let multiples = (0..50u64).map(|k| k.wrapping_mul(u64::from(n)));
            for x in xs.iter().copied().chain(multiples) {
                for x in [x, x.wrapping_sub(1), x.wrapping_add(1)] {
                    assert_eq!(modulo.reduce(x), (x % u64::from(n)) as u32, "{x} % {n}");
                }
            }
        }
    }

    /// Takes minutes under Miri whatever its size (the floating-point path is slow to
    /// interpret), and holds no unsafe code of its own: run natively only.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn the_floating_point_pmod_is_exact() {
        let mut hashes: Vec<u32> = (0..20_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        hashes.extend([0, 1, u32::MAX, 1 << 31, (1 << 31) - 1, (1 << 31) + 1]);
        for n in [
            1u32,
            2,
            3,
            7,
            200,
            999,
            1000,
            1 << 19,
            (1 << 20) - 1,
            1 << 20,
        ] {
            // Multiples of n (positive and negative) are where the quotient may come out low.
            let multiples = (-50i64..50)
                .map(|k| (k * i64::from(n)).clamp(i32::MIN.into(), i32::MAX.into()) as i32 as u32);
            let all: Vec<u32> = hashes.iter().copied().chain(multiples).collect();
            let inverse = 1.0 / f64::from(n);
            let mut batch = Vec::new();
            Pmod::new(n).reduce_all(&all, &mut batch);
            for (&h, &got) in all.iter().zip(&batch) {
                let want = i64::from(h as i32).rem_euclid(i64::from(n)) as u32;
                assert_eq!(
                    pmod_f64(h, n as i32, inverse),
                    want,
                    "pmod({}, {n})",
                    h as i32
                );
                assert_eq!(got, want, "pmod({}, {n})", h as i32);
            }
        }
    }

    #[test]
    fn modulo_is_exact_on_the_edges() {
        let values = [
            0u32,
            1,
            2,
            3,
            7,
            100,
            1 << 31,
            (1 << 31) - 1,
            u32::MAX,
            u32::MAX - 1,
        ];
        for n in [
            1u32,
            2,
            3,
            7,
            10,
            200,
            256,
            1000,
            1 << 20,
            (1 << 31) + 1,
            u32::MAX,
        ] {
            let modulo = Modulo::new(n);
            let pmod = Pmod::new(n);
            for x in values.into_iter().chain(
                (0..if cfg!(miri) { 100u32 } else { 2000 }).map(|i| i.wrapping_mul(2_654_435_761)),
            ) {
                assert_eq!(modulo.reduce(x), x % n, "{x} mod {n}");
                let h = x as i32;
                assert_eq!(
                    pmod.reduce(x) as i64,
                    (h as i64).rem_euclid(n as i64),
                    "pmod({h}, {n})"
                );
            }
        }
    }
}
