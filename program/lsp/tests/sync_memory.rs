//! What a sync holds while it waits to be written: its text once, about its own size, whatever
//! JSON makes of it. A 10 MiB file of control characters (six bytes each as JSON, `\u0001`) in a
//! `didChange` and a `didSave` with its text was two 60 MiB frames, each built through two more
//! copies of the text and a growing 64 MiB buffer.
//!
//! Its own test binary: the counting allocator counts every allocation of the process.

use claude_ide_bridge_testsupport::counting_alloc;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

#[test]
fn a_large_sync_holds_about_its_text() {
    let big = "\u{1}".repeat(10 << 20);
    let (running, peak) =
        counting_alloc::peak_during(|| claude_ide_bridge_lsp::fuzzing::sync_texts(&["x", &big]));
    eprintln!(
        "peak memory syncing a {}-byte text: {peak} bytes",
        big.len()
    );
    assert!(
        peak < big.len() + big.len() / 2,
        "{peak} bytes for a {}-byte text",
        big.len()
    );
    assert!(running, "taken for a server that does not read");
}
