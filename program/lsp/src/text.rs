//! Positions and edits: LSP counts a position's `character` in UTF-16 code units (the only encoding this
//! client offers, so no other is negotiated), lines end at `\n`, `\r\n` or `\r`.

use lsp_types::{Position, TextEdit};

// The bytes the position walk has looked at on this thread, counted in the unit tests only: how
// they check that many positions cost one pass over the text.
#[cfg(test)]
thread_local!(static WALKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });

/// Counts `n` bytes looked at by the walk (`WALKED`); nothing outside the unit tests.
#[inline(always)]
fn walked(n: usize) {
    #[cfg(test)]
    WALKED.with(|w| w.set(w.get() + n));
    let _ = n;
}

/// Where `text` ends, as an LSP position: its line breaks counted (`\r\n` as one), and the
/// UTF-16 units of its last line. An edit from the start to there replaces the whole text.
///
/// ```
/// use claude_ide_bridge_lsp::text::end_of;
/// use lsp_types::Position;
/// assert_eq!(end_of(""), Position::new(0, 0));
/// assert_eq!(end_of("a\r\nb😀"), Position::new(1, 3));
/// assert_eq!(end_of("a\rb\n"), Position::new(2, 0));
/// ```
pub fn end_of(text: &str) -> Position {
    let bytes = text.as_bytes();
    let mut line = 0u32;
    let mut last = 0;
    let mut i = 0;
    while let Some(at) = bytes[i..].iter().position(|&b| b == b'\n' || b == b'\r') {
        let at = i + at;
        i = match bytes[at] == b'\r' && bytes.get(at + 1) == Some(&b'\n') {
            true => at + 2,
            false => at + 1,
        };
        line = line.saturating_add(1);
        last = i;
    }
    walked(text.len());
    let character = text[last..].encode_utf16().count() as u32;
    Position::new(line, character)
}

/// The byte offset in `text` of an LSP position. A line past the end gives the end of the text; a character
/// past the end of its line gives the end of the line (as the protocol asks); a position inside a UTF-16
/// surrogate pair gives the start of that character.
///
/// ```
/// use claude_ide_bridge_lsp::text::offset_of;
/// use lsp_types::Position;
/// let text = "a😀b\r\nsecond";
/// assert_eq!(offset_of(text, Position::new(0, 3)), 5); // 😀 is two UTF-16 units, four bytes
/// assert_eq!(offset_of(text, Position::new(0, 99)), 6); // clamped before "\r\n"
/// assert_eq!(offset_of(text, Position::new(1, 2)), 10);
/// assert_eq!(offset_of(text, Position::new(7, 0)), text.len());
/// ```
pub fn offset_of(text: &str, pos: Position) -> usize {
    offsets_of(text, &[pos])[0]
}

/// The byte offsets of many positions at once, as [`offset_of`] gives each: one pass over the
/// text, the positions taken in order, so that a server's answer with many edits to a large file
/// costs the file's length plus sorting the edits, not the file's length per edit.
fn offsets_of(text: &str, positions: &[Position]) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut order: Vec<usize> = (0..positions.len()).collect();
    order.sort_by_key(|&i| (positions[i].line, positions[i].character));
    let mut out = vec![text.len(); positions.len()];
    // Where the walk stands: the line it is on, where that line's content ends (`None` past the
    // last line: every position there is the end of the text), and a place on it: its byte
    // offset and the UTF-16 units before it on the line.
    let mut line = 0u32;
    let mut end = Some(line_content_end(bytes, 0));
    let (mut at, mut units) = (0usize, 0u32);
    for i in order {
        let pos = positions[i];
        while line < pos.line {
            let Some(next) = end.and_then(|e| line_after(bytes, e)) else {
                end = None;
                break;
            };
            line += 1;
            end = Some(line_content_end(bytes, next));
            (at, units) = (next, 0);
        }
        let Some(end) = end else {
            break; // this position and the rest are past the last line
        };
        for ch in text[at..end].chars() {
            let width = ch.len_utf16() as u32;
            if units + width > pos.character {
                break;
            }
            units += width;
            at += ch.len_utf8();
            walked(ch.len_utf8());
        }
        out[i] = at;
    }
    out
}

/// Where the line after a line whose content ends at `end` starts, if there is one.
fn line_after(bytes: &[u8], end: usize) -> Option<usize> {
    match bytes.get(end)? {
        b'\r' if bytes.get(end + 1) == Some(&b'\n') => Some(end + 2),
        _ => Some(end + 1),
    }
}

fn line_content_end(bytes: &[u8], start: usize) -> usize {
    let end = bytes[start..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map_or(bytes.len(), |rel| start + rel);
    walked(end - start);
    end
}

/// `text` without its byte-order mark (U+FEFF at its start), as servers are handed a file: an
/// editor's document holds none (VS Code takes it as the file's encoding), and a server counts
/// it as a character, which moved every position on the first line by one (and made the
/// answers for a file with the mark and for the same text without it differ).
///
/// ```
/// use claude_ide_bridge_lsp::text::without_bom;
/// assert_eq!(without_bom("\u{feff}import os\n"), "import os\n");
/// assert_eq!(without_bom("import os\n"), "import os\n");
/// ```
pub fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Applies a server's edits to `text`. Edits refer to the original text and must not overlap; edits starting
/// at the same place are applied in the order given. `Err` says what is wrong with them.
///
/// ```
/// use claude_ide_bridge_lsp::text::apply_edits;
/// use lsp_types::{Position, Range, TextEdit};
/// let edit = |l1, c1, l2, c2, new: &str| TextEdit::new(Range::new(Position::new(l1, c1), Position::new(l2, c2)), new.into());
/// let text = "x=1\nif  x :\n  pass\n";
/// let edits = [edit(2, 0, 2, 2, "    "), edit(0, 1, 0, 2, " = "), edit(1, 2, 1, 4, " "), edit(1, 5, 1, 6, "")];
/// assert_eq!(apply_edits(text, &edits).unwrap(), "x = 1\nif x:\n    pass\n");
/// ```
pub fn apply_edits(text: &str, edits: &[TextEdit]) -> Result<String, String> {
    let positions: Vec<Position> = edits
        .iter()
        .flat_map(|e| [e.range.start, e.range.end])
        .collect();
    let offsets = offsets_of(text, &positions);
    let mut spans: Vec<(usize, usize, usize)> = Vec::with_capacity(edits.len());
    for i in 0..edits.len() {
        let (start, end) = (offsets[2 * i], offsets[2 * i + 1]);
        if end < start {
            return Err(format!("edit {i} ends before it starts"));
        }
        spans.push((start, end, i));
    }
    // Stable: edits at the same start keep their order.
    spans.sort_by_key(|&(start, end, _)| (start, end));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(start, end, i) in &spans {
        if start < at {
            return Err(format!("edit {i} overlaps another edit"));
        }
        out.push_str(&text[at..start]);
        out.push_str(&edits[i].new_text);
        at = end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::Range;
    use proptest::prelude::*;

    fn utf16_position(text: &str, byte: usize) -> Position {
        let before = &text[..byte];
        let line_start = before.rfind(['\n']).map_or(0, |i| i + 1);
        let line = before.matches('\n').count() as u32;
        Position::new(line, before[line_start..].encode_utf16().count() as u32)
    }

    /// The offset of one position, walked from the start of the text (what `offset_of` did
    /// before positions were converted together).
    fn reference_offset(text: &str, pos: Position) -> usize {
        let bytes = text.as_bytes();
        let mut start = 0;
        for _ in 0..pos.line {
            match line_after(bytes, line_content_end(bytes, start)) {
                Some(next) => start = next,
                None => return text.len(),
            }
        }
        let line_end = line_content_end(bytes, start);
        let mut units = 0u32;
        for (i, ch) in text[start..line_end].char_indices() {
            let width = ch.len_utf16() as u32;
            if units + width > pos.character {
                return start + i;
            }
            units += width;
        }
        line_end
    }

    #[test]
    fn surrogate_pairs_and_lone_cr() {
        let text = "😀x\ry";
        assert_eq!(offset_of(text, Position::new(0, 1)), 0); // inside the pair: start of the emoji
        assert_eq!(offset_of(text, Position::new(0, 2)), 4);
        assert_eq!(offset_of(text, Position::new(1, 0)), 6);
        assert_eq!(offset_of(text, Position::new(1, 1)), 7);
        assert_eq!(offset_of("", Position::new(0, 5)), 0);
    }

    #[test]
    fn overlapping_and_backward_edits_are_refused() {
        let r = |a, b| Range::new(Position::new(0, a), Position::new(0, b));
        assert!(apply_edits(
            "abcdef",
            &[
                TextEdit::new(r(0, 3), "".into()),
                TextEdit::new(r(2, 4), "".into())
            ]
        )
        .is_err());
        assert!(apply_edits("abcdef", &[TextEdit::new(r(3, 1), "".into())]).is_err());
        let inserts = [
            TextEdit::new(r(1, 1), "X".into()),
            TextEdit::new(r(1, 1), "Y".into()),
        ];
        assert_eq!(apply_edits("ab", &inserts).unwrap(), "aXYb");
    }

    /// A server's answer of many edits to a large file: converted in one pass, not one pass per
    /// edit (90,000 edits to 10 MB would scan about 10^12 bytes), and each edit lands where
    /// [`offset_of`] puts it alone, positions past the end of a line or of the text included.
    /// "One pass" is checked by the bytes the walk looked at (`WALKED`): at most twice the text's
    /// length (each line's end found once, each character before a position stepped over once),
    /// where a walk per edit looks at thousands of times more.
    #[test]
    fn many_edits_to_a_large_text_are_placed_in_one_pass() {
        let walked_by = |text: &str, edits: &[TextEdit]| {
            WALKED.with(|w| w.set(0));
            let out = apply_edits(text, edits).unwrap();
            (out, WALKED.with(|w| w.get()))
        };
        let line = "x".repeat(99) + "\n";
        let text = line.repeat(5_000);
        let mut edits: Vec<TextEdit> = (0..4_500u32)
            .map(|n| {
                let p = Position::new(n, 99);
                TextEdit::new(Range::new(p, p), ";".into())
            })
            .collect();
        // Past the last line, with the largest line number there is: the end of the text.
        let far = Position::new(u32::MAX, 0);
        edits.push(TextEdit::new(Range::new(far, far), "end".into()));
        let (out, walked) = walked_by(&text, &edits);
        // And at least half of it: a count that stopped counting would pass the bound above.
        assert!(
            walked >= text.len() / 2 && walked <= 2 * text.len(),
            "{walked} bytes walked for {}",
            text.len()
        );
        assert!(out.starts_with(&format!("{};\n", "x".repeat(99))));
        assert!(out.ends_with(&format!("{}\nend", "x".repeat(99))));
        assert_eq!(out.matches(';').count(), 4_500);
        // Many edits on one long line.
        let long = "ab".repeat(50_000);
        let edits: Vec<TextEdit> = (0..5_000u32)
            .map(|n| {
                let p = Position::new(0, n * 20);
                TextEdit::new(Range::new(p, Position::new(0, n * 20 + 1)), "A".into())
            })
            .collect();
        let (out, walked) = walked_by(&long, &edits);
        assert!(
            walked >= long.len() / 2 && walked <= 2 * long.len(),
            "{walked} bytes walked for {}",
            long.len()
        );
        assert_eq!(out.matches('A').count(), 5_000);
        assert!(out.starts_with("Abab"));
    }

    proptest! {
        /// The end of a text is the position of its last byte's end: an edit from the start to
        /// there covers all of it.
        #[test]
        fn the_end_of_a_text_is_its_length(text in "[a\r\né😀\n]{0,40}") {
            let end = super::end_of(&text);
            prop_assert_eq!(offset_of(&text, end), text.len());
            // Nothing past it: one more character on its line is still the end.
            let past = Position::new(end.line, end.character + 1);
            prop_assert_eq!(offset_of(&text, past), text.len());
        }

        /// Many positions converted together land where each lands alone.
        #[test]
        fn positions_together_are_where_each_is_alone(
            text in "[a-zé😀\n\r]{0,40}",
            positions in prop::collection::vec((0u32..8, 0u32..12), 0..12),
        ) {
            let positions: Vec<Position> = positions.into_iter().map(|(l, c)| Position::new(l, c)).collect();
            let together = offsets_of(&text, &positions);
            for (p, got) in positions.iter().zip(together) {
                prop_assert_eq!(got, reference_offset(&text, *p), "{:?} in {:?}", p, text);
            }
        }

        #[test]
        fn a_utf16_position_maps_back_to_its_byte(text in "[a-zé😀\n]{0,40}", pick in any::<prop::sample::Index>()) {
            let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
            let byte = boundaries[pick.index(boundaries.len())];
            prop_assert_eq!(offset_of(&text, utf16_position(&text, byte)), byte);
        }

        #[test]
        fn replacing_a_span_matches_string_replacement(text in "[a-zé😀\n]{0,40}", a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>(), new in "[x😀]{0,3}") {
            let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
            let (mut s, mut e) = (boundaries[a.index(boundaries.len())], boundaries[b.index(boundaries.len())]);
            if s > e { std::mem::swap(&mut s, &mut e); }
            let edit = TextEdit::new(Range::new(utf16_position(&text, s), utf16_position(&text, e)), new.clone());
            let want = format!("{}{}{}", &text[..s], new, &text[e..]);
            prop_assert_eq!(apply_edits(&text, &[edit]).unwrap(), want);
        }
    }
}
