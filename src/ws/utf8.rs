//! UTF-8 validation of text messages: SIMD for long ones, `std` for short ones.

/// Inputs at least this long are validated with SIMD instructions (`simdutf8`, which picks AVX2 or SSE4.2 at
/// run time); shorter ones with `std::str::from_utf8`. Measured on an AVX2 machine: on ASCII (nearly every
/// JSON-RPC message) `std` is as fast or faster up to about 400 bytes (`simdutf8` pays a fixed cost for a
/// last partial 64-byte block: 9 ns for 100 bytes against 5 for `std`); on text with many non-ASCII letters
/// `simdutf8` wins from 64 bytes, but below this length the difference is tens of nanoseconds.
/// `frame_decode/ours/small` ran 7 % faster with 256 than with 64.
const SIMD_MIN: usize = 256;

/// `bytes` as a `&str`, or `None` if they are not UTF-8.
///
/// Long inputs go through `simdutf8`, several times faster than `std::str::from_utf8` on text that is not
/// plain ASCII (source code with a few accented letters: about 20 GB/s against 4). Validation is the largest
/// cost of receiving a large text frame, and safe code can only turn bytes into a `&str` through a validator.
#[inline]
pub fn str_from_utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.len() < SIMD_MIN {
        std::str::from_utf8(bytes).ok()
    } else {
        simdutf8::basic::from_utf8(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_std() {
        let long_ascii = "a".repeat(SIMD_MIN + 1);
        let mut long_bad = "é".repeat(SIMD_MIN).into_bytes();
        long_bad[SIMD_MIN + 1] = 0xFF;
        let cases: &[&[u8]] = &[
            b"",
            b"hello",
            "κόσμε".as_bytes(),
            "𝄞 and €".as_bytes(),
            &[0xC0, 0x80],
            &[0xED, 0xA0, 0x80],
            &[0xF4, 0x90, 0x80, 0x80],
            &[0xF0, 0x9F, 0x98],
            &[0xFF],
            &[0xE2, 0x82],
            long_ascii.as_bytes(),
            &long_bad,
        ];
        for c in cases {
            assert_eq!(str_from_utf8(c), std::str::from_utf8(c).ok(), "{c:?}");
        }
    }

    proptest::proptest! {
        /// Long inputs (the SIMD path): text with multi-byte characters, one byte possibly replaced.
        #[test]
        fn long_inputs_match_std(
            text in "[a-zé€😀\\n]{0,400}",
            corrupt in proptest::option::of((0usize..2000, proptest::prelude::any::<u8>())),
        ) {
            let mut bytes = text.into_bytes();
            if let (Some((at, b)), false) = (corrupt, bytes.is_empty()) {
                let at = at % bytes.len();
                bytes[at] = b;
            }
            proptest::prop_assert_eq!(str_from_utf8(&bytes), std::str::from_utf8(&bytes).ok());
        }
    }
}
