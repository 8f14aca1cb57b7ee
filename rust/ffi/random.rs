// SPDX-License-Identifier: GPL-2.0

//! The kernel's cryptographically secure random numbers (`get_random_u32`,
//! `drivers/char/random.c`): what makes a QPN or a source port unpredictable
//! to an off-path attacker (Documentation/transport.rst, "Identity and threat
//! model").

use super::bindings as b;

/// `get_random_u32()`: 32 random bits from the kernel's CRNG.
pub(crate) fn random_u32() -> u32 {
    // SAFETY: `get_random_u32` has no preconditions: it may be called in any
    // context (it never sleeps) and, before the CRNG is seeded, still returns
    // the best bits it has.
    unsafe { b::get_random_u32() }
}
