//! One pass over a WebSocket text payload: unmask, validate UTF-8 and append to the message being assembled.
//!
//! [`TextBuf`] holds a text message that arrives in pieces (the reads of one large frame, or the frames of a
//! fragmented message). Each [`push_masked`](TextBuf::push_masked) takes masked bytes straight from the caller's
//! read buffer and, in a single pass, unmasks them, checks that they can be UTF-8 and stores them. It fails at
//! the first byte that can never be part of valid UTF-8, even when the text is incomplete, and holds the bytes
//! of a character cut by the end of a piece until the rest arrives. The whole text is then a `&str` without a
//! second validation pass.
//!
//! Besides the OS calls no crate makes for us (the runtime crate's and the files crate's `sys`
//! modules), this is the only crate of the project with `unsafe` code, kept here so that the
//! engine stays `forbid(unsafe_code)`. On x86-64 CPUs with AVX-512 (`avx512bw` and `avx512vbmi`, detected at run time) the
//! pass is a hand-written SIMD loop: safe code cannot both store bytes and validate them in one pass, and the
//! separate passes (copy, unmask, validate with `simdutf8`) run at about half its speed (`BENCHMARKS.md`).
//! Elsewhere, or with the `CLAUDE_IDE_BRIDGE_NO_AVX512` environment variable set, a portable path does the
//! same work in separate passes with safe code and `simdutf8`. Both are tested against `std` on every input
//! of up to three bytes and on random text cut at random places.
//!
//! ```
//! use claude_ide_bridge_text::TextBuf;
//!
//! let key = [0x37, 0xfa, 0x21, 0x3d];
//! let mask = |s: &[u8]| -> Vec<u8> { s.iter().enumerate().map(|(i, b)| b ^ key[i % 4]).collect() };
//! let masked = mask("caf€ ok".as_bytes());
//!
//! let mut text = TextBuf::new();
//! text.push_masked(&masked[..5], key, 0).unwrap(); // "caf" and the first two bytes of "€"
//! assert_eq!(text.as_str(), "caf");
//! text.push_masked(&masked[5..], key, 5).unwrap();
//! assert_eq!(text.finish().unwrap(), "caf€ ok");
//!
//! let mut bad = TextBuf::new();
//! assert!(bad.push_masked(&mask(&[b'a', 0xF4, 0x90])[..], key, 0).is_err()); // past U+10FFFF, at once
//! ```
#![deny(unsafe_op_in_unsafe_fn, missing_docs)]

use std::fmt;

/// The bytes pushed to a [`TextBuf`] are not UTF-8 (WebSocket close code 1007).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidUtf8;

impl fmt::Display for InvalidUtf8 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid UTF-8")
    }
}

impl std::error::Error for InvalidUtf8 {}

/// A text being assembled from masked pieces, validated as they arrive. See the [crate] documentation.
///
/// Invariant (what makes [`as_str`](Self::as_str) sound): `bytes[..valid]` is valid UTF-8, and the bytes after
/// it (at most 3) are the start of one character that can still be completed.
#[derive(Debug, Clone, Default)]
pub struct TextBuf {
    bytes: Vec<u8>,
    valid: usize,
}

impl TextBuf {
    /// An empty text. Allocates nothing.
    pub const fn new() -> Self {
        TextBuf {
            bytes: Vec::new(),
            valid: 0,
        }
    }

    /// Unmask `masked` with the WebSocket masking `key`, validate it and append it. `phase` is the offset of
    /// `masked[0]` in its frame's payload (the key byte it is masked with is `key[phase % 4]`); pass a zero
    /// key for bytes that are not masked.
    ///
    /// Fails as soon as the bytes cannot be UTF-8 whatever follows; a character cut by the end of `masked` is
    /// kept and completed by the next push. On failure the text keeps only what was valid before the failing
    /// character; it is meant to be dropped (the connection fails).
    pub fn push_masked(
        &mut self,
        masked: &[u8],
        key: [u8; 4],
        phase: usize,
    ) -> Result<(), InvalidUtf8> {
        self.push_with(masked, key, phase, Path::detect())
    }

    /// The text so far, without an incomplete character at its end.
    pub fn as_str(&self) -> &str {
        debug_assert!(std::str::from_utf8(&self.bytes[..self.valid]).is_ok());
        // SAFETY: `bytes[..valid]` is valid UTF-8, the invariant every method that changes `bytes` or
        // `valid` keeps: bytes only enter through `push_with`, which moves `valid` only over bytes it
        // validated, and `clear`/`reserve`/`shrink_to` keep the contents.
        unsafe { std::str::from_utf8_unchecked(&self.bytes[..self.valid]) }
    }

    /// The text is complete: the whole of it, or an error if it ends inside a character.
    pub fn finish(&self) -> Result<&str, InvalidUtf8> {
        if self.valid == self.bytes.len() {
            Ok(self.as_str())
        } else {
            Err(InvalidUtf8)
        }
    }

    /// Bytes pushed so far, counting those of an incomplete character at the end.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True when nothing was pushed since the last [`clear`](Self::clear).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// True when the bytes pushed end inside a character.
    pub fn is_incomplete(&self) -> bool {
        self.valid < self.bytes.len()
    }

    /// Forget the text, keeping the allocation.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.valid = 0;
    }

    /// Bytes allocated.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Make room for exactly `additional` more bytes (see [`Vec::reserve_exact`]).
    pub fn reserve_exact(&mut self, additional: usize) {
        self.bytes.reserve_exact(additional);
    }

    /// Give back memory above `min_capacity` (see [`Vec::shrink_to`]).
    pub fn shrink_to(&mut self, min_capacity: usize) {
        self.bytes.shrink_to(min_capacity);
    }

    fn push_with(
        &mut self,
        mut masked: &[u8],
        key: [u8; 4],
        mut phase: usize,
        path: Path,
    ) -> Result<(), InvalidUtf8> {
        // First complete a character held back from the last push, a byte at a time (at most 3), so that
        // the rest starts on a character boundary.
        while self.is_incomplete() {
            let Some((&b, rest)) = masked.split_first() else {
                return Ok(());
            };
            self.bytes.push(b ^ key[phase % 4]);
            masked = rest;
            phase += 1;
            match std::str::from_utf8(&self.bytes[self.valid..]) {
                Ok(_) => self.valid = self.bytes.len(),
                Err(e) if e.error_len().is_none() && self.bytes.len() - self.valid < 4 => {}
                Err(_) => return Err(self.reject()),
            }
        }
        if masked.is_empty() {
            return Ok(());
        }
        let start = self.bytes.len();
        self.bytes.reserve(masked.len());
        let ok = match path {
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => {
                let dst = self.bytes.spare_capacity_mut();
                // SAFETY: `Path::Avx512` is only chosen when the CPU has AVX-512F, BW and VBMI (checked at run
                // time in `Path::detect`, or by the tests before they force it).
                let ok = unsafe {
                    avx512::unmask_validate(masked, &mut dst[..masked.len()], key, phase)
                };
                if ok {
                    // SAFETY: `unmask_validate` initialised the first `masked.len()` bytes of the spare
                    // capacity, which `reserve` made at least that long.
                    unsafe { self.bytes.set_len(start + masked.len()) };
                }
                ok
            }
            Path::Portable => {
                self.bytes.extend_from_slice(masked);
                let new = &mut self.bytes[start..];
                apply_mask(new, key, phase);
                // A sequence cut by the end is held back below.
                match simdutf8::compat::from_utf8(new) {
                    Ok(_) => true,
                    Err(e) => e.error_len().is_none(),
                }
            }
        };
        if !ok {
            self.bytes.truncate(start);
            return Err(self.reject());
        }
        let new = &self.bytes[start..];
        let cut = start + new.len() - incomplete_suffix_len(new);
        // Before `cut` the new bytes are valid UTF-8 starting on a character boundary: the SIMD pass found no
        // error at any of their positions, `incomplete_suffix_len` kept out a character the push ends inside. What is
        // held back must be a possible start of a character: a byte that never is fails now.
        if std::str::from_utf8(&self.bytes[cut..])
            .err()
            .is_some_and(|e| e.error_len().is_some())
        {
            return Err(self.reject());
        }
        self.valid = cut;
        Ok(())
    }

    /// Drop what follows the valid part and return the error.
    fn reject(&mut self) -> InvalidUtf8 {
        self.bytes.truncate(self.valid);
        InvalidUtf8
    }
}

/// How many bytes at the end of `bytes` (0-3) start a UTF-8 character that is not complete: where a text
/// cut at the end of `bytes` must be held back until more arrives. Only the last three bytes are looked at;
/// what they hold is not validated (a byte that can start no character, such as `0xFF`, counts as the start
/// of a 4-byte one).
///
/// ```
/// use claude_ide_bridge_text::incomplete_suffix_len;
/// let euro = "a€".as_bytes(); // 61 E2 82 AC
/// assert_eq!(incomplete_suffix_len(&euro[..3]), 2);
/// assert_eq!(incomplete_suffix_len(euro), 0);
/// assert_eq!(incomplete_suffix_len(b"plain"), 0);
/// ```
pub fn incomplete_suffix_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=n.min(3) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: its lead is further back
        }
        let need = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xFF => 4,
            _ => 1,
        };
        return if need > back { back } else { 0 };
    }
    0
}

/// XOR `data` with the WebSocket masking `key`, where `data[0]` is masked with key byte `phase % 4`.
///
/// Works on 8-byte words (a loop the compiler turns into vector instructions: about 70 GB/s on data in
/// cache), then on the last few bytes. Masking twice gives the data back.
///
/// ```
/// use claude_ide_bridge_text::apply_mask;
/// let mut data = *b"Hello";
/// apply_mask(&mut data, [1, 2, 3, 4], 0);
/// let (a, b) = data.split_at_mut(2);
/// apply_mask(a, [1, 2, 3, 4], 0);
/// apply_mask(b, [1, 2, 3, 4], 2);
/// assert_eq!(&data, b"Hello");
/// ```
#[inline]
pub fn apply_mask(data: &mut [u8], key: [u8; 4], phase: usize) {
    // The key as a little-endian word starting at byte `phase` of the key: byte `i` of the word is
    // `key[(phase + i) % 4]`.
    let m = u32::from_le_bytes(key).rotate_right(8 * (phase & 3) as u32);
    let word = u64::from(m) | (u64::from(m) << 32);
    let mut words = data.chunks_exact_mut(8);
    for w in &mut words {
        let v = u64::from_le_bytes(<[u8; 8]>::try_from(&*w).expect("8-byte chunk")) ^ word;
        w.copy_from_slice(&v.to_le_bytes());
    }
    for (b, k) in words.into_remainder().iter_mut().zip(word.to_le_bytes()) {
        *b ^= k;
    }
}

/// Which implementation a push runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// The one-pass AVX-512 loop.
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// Separate passes in safe code.
    Portable,
}

impl Path {
    fn detect() -> Path {
        #[cfg(target_arch = "x86_64")]
        {
            use std::sync::atomic::{AtomicU8, Ordering};
            // 0: not checked yet, 1: AVX-512, 2: portable.
            static CHOSEN: AtomicU8 = AtomicU8::new(0);
            match CHOSEN.load(Ordering::Relaxed) {
                1 => return Path::Avx512,
                2 => return Path::Portable,
                _ => {}
            }
            let path = if avx512::available()
                && std::env::var_os("CLAUDE_IDE_BRIDGE_NO_AVX512").is_none()
            {
                Path::Avx512
            } else {
                Path::Portable
            };
            CHOSEN.store(if path == Path::Avx512 { 1 } else { 2 }, Ordering::Relaxed);
            path
        }
        #[cfg(not(target_arch = "x86_64"))]
        Path::Portable
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    //! UTF-8 validation after Keiser and Lemire, "Validating UTF-8 in less than one instruction per byte"
    //! (2021): each byte is classified, with three 16-entry table lookups, by the high nibble of the byte
    //! before it, the low nibble of that byte and its own high nibble; the three bit sets are ANDed, so a bit
    //! that survives names an error in that pair of bytes. A byte that must be the second or third
    //! continuation of a 3- or 4-byte character is checked against the lead two or three bytes back. Here
    //! each 64-byte block is also unmasked and stored in the same pass.

    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    // Error bits of the lookup tables.
    const TOO_SHORT: u8 = 1 << 0; // a lead byte not followed by enough continuation bytes
    const TOO_LONG: u8 = 1 << 1; // a continuation byte after an ASCII byte
    const OVERLONG_3: u8 = 1 << 2; // E0 followed by 80..9F
    const TOO_LARGE: u8 = 1 << 3; // F4 followed by 90..BF, or F5..FF
    const SURROGATE: u8 = 1 << 4; // ED followed by A0..BF
    const OVERLONG_2: u8 = 1 << 5; // C0 or C1
    const TOO_LARGE_1000: u8 = 1 << 6; // F5..FF followed by 80..8F
    const OVERLONG_4: u8 = 1 << 6; // F0 followed by 80..8F
    const TWO_CONTS: u8 = 1 << 7; // two continuation bytes in a row (an error unless a 3- or 4-byte character)
    const CARRY: u8 = TOO_SHORT | TOO_LONG | TWO_CONTS;

    /// By the high nibble of the previous byte.
    const BYTE_1_HIGH: [u8; 16] = [
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TOO_LONG,
        TWO_CONTS,
        TWO_CONTS,
        TWO_CONTS,
        TWO_CONTS,
        TOO_SHORT | OVERLONG_2,
        TOO_SHORT,
        TOO_SHORT | OVERLONG_3 | SURROGATE,
        TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4,
    ];

    /// By the low nibble of the previous byte.
    const BYTE_1_LOW: [u8; 16] = [
        CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4,
        CARRY | OVERLONG_2,
        CARRY,
        CARRY,
        CARRY | TOO_LARGE,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
        CARRY | TOO_LARGE | TOO_LARGE_1000,
    ];

    /// By the high nibble of the byte itself.
    const BYTE_2_HIGH: [u8; 16] = [
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
        TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
        TOO_SHORT,
    ];

    /// True when this CPU runs [`unmask_validate`].
    pub(super) fn available() -> bool {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vbmi")
    }

    /// A 16-byte table in each 128-bit lane, for `vpshufb`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    fn table(t: [u8; 16]) -> __m512i {
        _mm512_broadcast_i32x4(_mm_set_epi8(
            t[15] as i8,
            t[14] as i8,
            t[13] as i8,
            t[12] as i8,
            t[11] as i8,
            t[10] as i8,
            t[9] as i8,
            t[8] as i8,
            t[7] as i8,
            t[6] as i8,
            t[5] as i8,
            t[4] as i8,
            t[3] as i8,
            t[2] as i8,
            t[1] as i8,
            t[0] as i8,
        ))
    }

    /// Indices for `vpermt2b` that give, at byte `i`, the byte `back` places before it in the stream made of
    /// the previous block (indices 0-63) followed by the current one (64-127).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    fn shift_index(back: usize) -> __m512i {
        let mut idx = [0u8; 64];
        for (i, x) in idx.iter_mut().enumerate() {
            *x = (64 + i - back) as u8;
        }
        // SAFETY: `idx` is 64 readable bytes; the load is unaligned.
        unsafe { _mm512_loadu_si512(idx.as_ptr().cast()) }
    }

    /// Unmask `src` with `key` (from key byte `phase % 4`), store it into `dst` (as long as `src`) and check
    /// that it is UTF-8 starting on a character boundary. Returns false when a byte at any position of `src`
    /// is an error whatever follows; a character cut by the end of `src` is not an error here (the caller
    /// checks it). Every byte of `dst` is written, also when it returns false.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX-512F, AVX-512BW and AVX-512VBMI ([`available`]).
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn unmask_validate(
        src: &[u8],
        dst: &mut [MaybeUninit<u8>],
        key: [u8; 4],
        phase: usize,
    ) -> bool {
        assert_eq!(src.len(), dst.len());
        let n = src.len();
        let word = u32::from_le_bytes(key).rotate_right(8 * (phase & 3) as u32);
        // Blocks are 64 bytes, a multiple of 4: every block starts at the same key byte.
        let key = _mm512_set1_epi32(word as i32);
        let (t1h, t1l, t2h) = (table(BYTE_1_HIGH), table(BYTE_1_LOW), table(BYTE_2_HIGH));
        let (back1, back2, back3) = (shift_index(1), shift_index(2), shift_index(3));
        let nibble = _mm512_set1_epi8(0x0F);
        // A byte in the last three of a block that starts a character longer than what is left of the block:
        // greater than these limits.
        let mut limits = [0xFFu8; 64];
        limits[61] = 0xEF;
        limits[62] = 0xDF;
        limits[63] = 0xBF;
        // SAFETY: `limits` is 64 readable bytes.
        let limits = unsafe { _mm512_loadu_si512(limits.as_ptr().cast()) };
        // The stream starts on a character boundary: as if after ASCII.
        let mut prev = _mm512_setzero_si512();
        let mut prev_incomplete = _mm512_setzero_si512();
        let mut error = _mm512_setzero_si512();

        let mut check = |cur: __m512i, valid_bytes: __mmask64| {
            if _mm512_movepi8_mask(cur) == 0 {
                // All ASCII: an error only if the last block ended inside a character, whose next byte,
                // this block's first, is a byte of `src` (a block is checked only if it holds one).
                error = _mm512_or_si512(error, prev_incomplete);
            } else {
                let prev1 = _mm512_permutex2var_epi8(prev, back1, cur);
                let prev2 = _mm512_permutex2var_epi8(prev, back2, cur);
                let prev3 = _mm512_permutex2var_epi8(prev, back3, cur);
                let p1_high = _mm512_and_si512(_mm512_srli_epi16::<4>(prev1), nibble);
                let p1_low = _mm512_and_si512(prev1, nibble);
                let high = _mm512_and_si512(_mm512_srli_epi16::<4>(cur), nibble);
                let special = _mm512_and_si512(
                    _mm512_and_si512(
                        _mm512_shuffle_epi8(t1h, p1_high),
                        _mm512_shuffle_epi8(t1l, p1_low),
                    ),
                    _mm512_shuffle_epi8(t2h, high),
                );
                // 0x80 where the byte two back is E0..FF or the byte three back is F0..FF: this byte must
                // be a continuation, which the tables marked TWO_CONTS (bit 7); the XOR clears that bit
                // exactly when both agree.
                let third = _mm512_subs_epu8(prev2, _mm512_set1_epi8((0xE0u8 - 0x80) as i8));
                let fourth = _mm512_subs_epu8(prev3, _mm512_set1_epi8((0xF0u8 - 0x80) as i8));
                let must_continue = _mm512_and_si512(
                    _mm512_or_si512(third, fourth),
                    _mm512_set1_epi8(0x80u8 as i8),
                );
                let block_error = _mm512_xor_si512(must_continue, special);
                // Only errors at positions holding bytes of `src` count (a last, partial block is padded).
                error = _mm512_or_si512(error, _mm512_maskz_mov_epi8(valid_bytes, block_error));
            }
            prev_incomplete = _mm512_subs_epu8(cur, limits);
            prev = cur;
        };

        let mut i = 0;
        while i + 64 <= n {
            // SAFETY: bytes `i..i + 64` are within `src` and `dst` (same length); unaligned load and store.
            let cur = unsafe {
                let cur = _mm512_xor_si512(_mm512_loadu_si512(src.as_ptr().add(i).cast()), key);
                _mm512_storeu_si512(dst.as_mut_ptr().add(i).cast(), cur);
                cur
            };
            check(cur, !0);
            i += 64;
        }
        if i < n {
            let valid_bytes: __mmask64 = (1u64 << (n - i)) - 1;
            // SAFETY: the masked load reads and the masked store writes only bytes `i..n`, within `src` and
            // `dst`; masked-off bytes are not accessed (AVX-512 suppresses faults on them).
            let cur = unsafe {
                let loaded = _mm512_maskz_loadu_epi8(valid_bytes, src.as_ptr().add(i).cast());
                // Padding stays zero (ASCII): it cannot raise an error at a position of `src`.
                let cur = _mm512_maskz_mov_epi8(valid_bytes, _mm512_xor_si512(loaded, key));
                _mm512_mask_storeu_epi8(dst.as_mut_ptr().add(i).cast(), valid_bytes, cur);
                cur
            };
            check(cur, valid_bytes);
        }
        _mm512_test_epi8_mask(error, error) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path this machine can run.
    fn paths() -> Vec<Path> {
        #[cfg(target_arch = "x86_64")]
        let simd = avx512::available().then_some(Path::Avx512);
        #[cfg(not(target_arch = "x86_64"))]
        let simd = None;
        std::iter::once(Path::Portable).chain(simd).collect()
    }

    fn mask(bytes: &[u8], key: [u8; 4], phase: usize) -> Vec<u8> {
        bytes
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[(phase + i) % 4])
            .collect()
    }

    /// Push `bytes` cut at `cuts` (ascending) through `path`; the verdict and, when accepted, the text.
    fn assemble(bytes: &[u8], cuts: &[usize], path: Path) -> Result<String, InvalidUtf8> {
        let key = [0x9a, 0x01, 0xff, 0x5c];
        let masked = mask(bytes, key, 0);
        let mut t = TextBuf::new();
        let mut at = 0;
        for &c in cuts.iter().chain(std::iter::once(&bytes.len())) {
            let c = c.clamp(at, bytes.len());
            t.push_with(&masked[at..c], key, at, path)?;
            assert!(
                std::str::from_utf8(&bytes[..t.valid]).is_ok(),
                "{path:?} accepted {:x?} of {bytes:x?}",
                &bytes[..t.valid]
            );
            assert_eq!(t.as_str().as_bytes(), &bytes[..t.valid]);
            at = c;
        }
        t.finish().map(str::to_owned)
    }

    /// The path pushes take: AVX-512 where the CPU has it, unless `CLAUDE_IDE_BRIDGE_NO_AVX512`
    /// says not to (the suite's second run of the engine's tests), the portable one otherwise.
    /// A machine without AVX-512 tests the portable path alone: said on standard error, and by
    /// `scripts/test-all.sh`, which looks at the CPU's flags.
    #[test]
    fn the_path_chosen_is_the_fastest_this_machine_runs_unless_told() {
        #[cfg(target_arch = "x86_64")]
        let expected =
            if avx512::available() && std::env::var_os("CLAUDE_IDE_BRIDGE_NO_AVX512").is_none() {
                Path::Avx512
            } else {
                Path::Portable
            };
        #[cfg(not(target_arch = "x86_64"))]
        let expected = Path::Portable;
        assert_eq!(Path::detect(), expected);
        // Asked again: the same, from the stored choice.
        assert_eq!(Path::detect(), expected);
        if paths() == [Path::Portable] {
            eprintln!("paths: the portable one alone (no AVX-512 here)");
        }
    }

    /// Every sequence of up to three bytes, placed at the start, across a 64-byte block boundary after ASCII,
    /// and after a multi-byte character; the shorter ones also cut in two.
    #[test]
    fn every_short_input_agrees_with_std() {
        let mut t = TextBuf::new();
        let mut bytes = Vec::new();
        for path in paths() {
            for len in 1..=3usize {
                for x in 0..1usize << (8 * len) {
                    for prefix_len in [0usize, 62, 63] {
                        bytes.clear();
                        bytes.resize(prefix_len, b'a');
                        if prefix_len == 62 {
                            bytes[60..62].copy_from_slice("é".as_bytes());
                        }
                        bytes.extend((0..len).map(|i| (x >> (8 * i)) as u8));
                        let expect = std::str::from_utf8(&bytes).is_ok();
                        t.clear();
                        let got =
                            t.push_with(&bytes, [0; 4], 0, path).is_ok() && t.finish().is_ok();
                        assert_eq!(got, expect, "{path:?} {bytes:x?}");
                        if len < 3 {
                            // Cut inside the sequence, masked: the same verdict.
                            let cut = prefix_len + 1;
                            let got = assemble(&bytes, &[cut], path).is_ok();
                            assert_eq!(got, expect, "{path:?} cut {cut} {bytes:x?}");
                        }
                    }
                }
            }
        }
    }

    /// Four-byte sequences around the edges of the valid range, at every offset of a block.
    #[test]
    fn four_byte_edges() {
        let leads = [0xEF, 0xF0, 0xF3, 0xF4, 0xF5, 0xFF];
        let conts = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0];
        for path in paths() {
            for &a in &leads {
                for &b in &conts {
                    for &c in &conts {
                        for &d in &conts {
                            for offset in 0..66 {
                                let mut bytes = vec![b'x'; offset];
                                bytes.extend_from_slice(&[a, b, c, d]);
                                bytes.extend_from_slice(b"tail");
                                let expect = std::str::from_utf8(&bytes).is_ok();
                                assert_eq!(
                                    assemble(&bytes, &[], path).is_ok(),
                                    expect,
                                    "{path:?} {bytes:x?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fails_at_the_first_impossible_byte() {
        for path in paths() {
            let key = [1, 2, 3, 4];
            for (ok_part, bad) in [
                (&b"ok"[..], &[0xF4u8, 0x90][..]),
                (b"ok\xED", &[0xA0]),
                (b"", &[0xE0, 0x80]),
                (b"\xF0", &[0x8F]),
                (b"a", &[0xFF]),
                (b"a", &[0x80]),
            ] {
                let mut t = TextBuf::new();
                t.push_with(&mask(ok_part, key, 0), key, 0, path).unwrap();
                let res = t.push_with(&mask(bad, key, ok_part.len()), key, ok_part.len(), path);
                assert_eq!(res, Err(InvalidUtf8), "{path:?} {ok_part:x?} {bad:x?}");
            }
            // A character cut by the end is not an error until the text ends.
            let mut t = TextBuf::new();
            t.push_with(&mask("a€".as_bytes(), key, 0)[..3], key, 0, path)
                .unwrap();
            assert!(t.is_incomplete());
            assert_eq!(t.as_str(), "a");
            assert_eq!(t.finish(), Err(InvalidUtf8));
        }
    }

    proptest::proptest! {
        /// Text with multi-byte characters, perhaps one byte replaced, cut in up to four pieces anywhere:
        /// the same verdict as `std` on every path, and the same text when accepted.
        #[test]
        fn random_text_any_cuts(
            text in "[a-zé€😀\\n]{0,300}",
            corrupt in proptest::option::of((0usize..2000, proptest::prelude::any::<u8>())),
            mut cuts in proptest::collection::vec(0usize..2000, 0..4),
        ) {
            let mut bytes = text.into_bytes();
            if let (Some((at, b)), false) = (corrupt, bytes.is_empty()) {
                let at = at % bytes.len();
                bytes[at] = b;
            }
            cuts.sort();
            let expect = std::str::from_utf8(&bytes).ok().map(str::to_owned);
            for path in paths() {
                let got = assemble(&bytes, &cuts, path).ok();
                proptest::prop_assert_eq!(&got, &expect, "{:?}", path);
            }
        }

        /// Random bytes: rarely valid, so this mostly checks that every error is found on every path.
        #[test]
        fn random_bytes_any_cuts(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            mut cuts in proptest::collection::vec(0usize..200, 0..3),
        ) {
            cuts.sort();
            let expect = std::str::from_utf8(&bytes).is_ok();
            for path in paths() {
                proptest::prop_assert_eq!(assemble(&bytes, &cuts, path).is_ok(), expect);
            }
        }
    }
}
