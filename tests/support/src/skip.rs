//! Tests that cannot run on this machine, said where the whole suite's summary shows them.
//!
//! A test whose requirement is missing returns early instead of failing. Two kinds:
//!
//! - [`tool_missing`]: a program the suite installs (`scripts/test-all.sh`: Vim, tmux, `script`,
//!   Python): under CI (`CLAUDE_IDE_BRIDGE_CI`, set by `.ci/run`) that is a broken install, and the
//!   test fails instead of passing without having run;
//! - [`skip`]: something of the machine itself (root, a user namespace, `binfmt_misc`, a file
//!   system's extended attributes, a debug build's switch): the test is skipped everywhere.
//!
//! Both write `SKIPPED: why` to standard error (which `cargo test` shows only for a failure) and
//! add a line to the file `CLAUDE_IDE_BRIDGE_SKIPS` names, when set: `scripts/test-all.sh` lists
//! those lines at the end of the run.

use std::io::Write;

/// The variable naming the file a skip is added to.
pub const SKIPS_FILE: &str = "CLAUDE_IDE_BRIDGE_SKIPS";

/// Records that the calling test does not run here, and why; the test then returns.
pub fn skip(why: &str) {
    eprintln!("SKIPPED: {why}");
    let Some(path) = std::env::var_os(SKIPS_FILE) else {
        return;
    };
    let test = std::thread::current()
        .name()
        .unwrap_or("(a test)")
        .to_owned();
    let program = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    // Cargo's test programs are `NAME-HASH`: the name alone.
    let program = match program.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => program,
    };
    // One write of one short line to a file opened to append: lines of tests running at once
    // do not interleave.
    let line = format!("{program} {test}: {why}\n");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut file) = file {
        let _ = file.write_all(line.as_bytes());
    }
}

/// A program the suite installs is missing: a failure under CI (`CLAUDE_IDE_BRIDGE_CI`), a
/// [`skip`] elsewhere (a developer's `cargo test` without it).
pub fn tool_missing(why: &str) {
    assert!(
        std::env::var_os("CLAUDE_IDE_BRIDGE_CI").is_none(),
        "{why}: CI provides it (scripts/test-all.sh and its steps), so its absence is a broken \
         install, not a skip"
    );
    skip(why);
}
