// SPDX-License-Identifier: GPL-2.0

//! Copies to and from memory that someone else may write at the same time:
//! rings shared with user space, and memory a kernel consumer handed the
//! device (its SGEs, its fast-registration pages).
//!
//! Under Rust's memory model a plain (`copy_nonoverlapping`) read racing a
//! write from another thread or from user space is a data race, hence
//! undefined behaviour. These copies use volatile accesses, which the
//! compiler neither elides, merges, nor splits into assumptions about the
//! value, so a racing writer only makes the bytes read unspecified, like
//! `copy_from_user` does for `kernel::uaccess::UserSlice`. Callers treat
//! what they read as untrusted bytes.

use core::ptr;

/// Copies `dst.len()` bytes from `src` into `dst`.
///
/// # Safety
///
/// `src` is valid for reads of `dst.len()` bytes for the duration of the
/// call (others may write it concurrently).
pub(crate) unsafe fn read(src: *const u8, dst: &mut [u8]) {
    let n = dst.len();
    let mut i = 0;
    // Byte by byte up to an 8-byte boundary of `src`, then whole words.
    while i < n && (src as usize + i) % 8 != 0 {
        // SAFETY: `i < n`: inside the readable range (caller's guarantee).
        dst[i] = unsafe { ptr::read_volatile(src.add(i)) };
        i += 1;
    }
    while i + 8 <= n {
        // SAFETY: `i + 8 <= n`, and `src + i` is 8-aligned.
        let w = unsafe { ptr::read_volatile(src.add(i).cast::<u64>()) };
        dst[i..i + 8].copy_from_slice(&w.to_ne_bytes());
        i += 8;
    }
    while i < n {
        // SAFETY: `i < n`.
        dst[i] = unsafe { ptr::read_volatile(src.add(i)) };
        i += 1;
    }
}

/// Copies `src` to `dst`.
///
/// # Safety
///
/// `dst` is valid for writes of `src.len()` bytes for the duration of the
/// call, and no Rust reference covers those bytes (others may access them
/// concurrently).
pub(crate) unsafe fn write(dst: *mut u8, src: &[u8]) {
    let n = src.len();
    let mut i = 0;
    while i < n && (dst as usize + i) % 8 != 0 {
        // SAFETY: `i < n`: inside the writable range (caller's guarantee).
        unsafe { ptr::write_volatile(dst.add(i), src[i]) };
        i += 1;
    }
    while i + 8 <= n {
        let mut w = [0u8; 8];
        w.copy_from_slice(&src[i..i + 8]);
        // SAFETY: `i + 8 <= n`, and `dst + i` is 8-aligned.
        unsafe { ptr::write_volatile(dst.add(i).cast::<u64>(), u64::from_ne_bytes(w)) };
        i += 8;
    }
    while i < n {
        // SAFETY: `i < n`.
        unsafe { ptr::write_volatile(dst.add(i), src[i]) };
        i += 1;
    }
}
