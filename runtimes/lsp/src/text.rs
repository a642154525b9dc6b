//! Positions and edits: LSP counts a position's `character` in UTF-16 code units (the only encoding this
//! client offers, so no other is negotiated), lines end at `\n`, `\r\n` or `\r`.

use lsp_types::{Position, TextEdit};

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
    let bytes = text.as_bytes();
    let mut start = 0;
    for _ in 0..pos.line {
        match next_line_start(bytes, start) {
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

/// Where the line after the one starting at `start` starts, if there is one.
fn next_line_start(bytes: &[u8], start: usize) -> Option<usize> {
    let rel = bytes[start..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')?;
    let at = start + rel;
    if bytes[at] == b'\r' && bytes.get(at + 1) == Some(&b'\n') {
        Some(at + 2)
    } else {
        Some(at + 1)
    }
}

fn line_content_end(bytes: &[u8], start: usize) -> usize {
    bytes[start..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map_or(bytes.len(), |rel| start + rel)
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
    let mut spans: Vec<(usize, usize, usize)> = Vec::with_capacity(edits.len());
    for (i, edit) in edits.iter().enumerate() {
        let start = offset_of(text, edit.range.start);
        let end = offset_of(text, edit.range.end);
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

    proptest! {
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
