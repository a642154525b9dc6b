//! Each crate keeps what differs between operating systems in a `sys` module: one file per
//! platform defining the same items, and the module's doc listing them under "The interface",
//! which is where a newcomer reads what the platform layer offers. This test keeps those lists
//! true: every item the platform files both define is named in the list, and every call the list
//! names (`name(...)`) is defined by one of them.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The `sys` modules: the doc's file and the platform files.
const MODULES: [(&str, &[&str]); 3] = [
    (
        "program/cli/src/sys/mod.rs",
        &[
            "program/cli/src/sys/unix/mod.rs",
            "program/cli/src/sys/windows.rs",
        ],
    ),
    (
        "runtimes/runtime/src/sys/mod.rs",
        &[
            "runtimes/runtime/src/sys/unix.rs",
            "runtimes/runtime/src/sys/windows.rs",
        ],
    ),
    (
        "program/lsp/src/sys/mod.rs",
        &[
            "program/lsp/src/sys/unix.rs",
            "program/lsp/src/sys/windows.rs",
        ],
    ),
];

/// The names of the items a platform file defines at its top (`pub fn`, `pub(crate) const`,
/// `pub struct`, ...) and re-exports (`pub use self::a::{b, c}`); with `nested`, those of its
/// inner modules too (glibc's `malloc` calls).
fn items(source: &str, nested: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    // A re-export's list wrapped over several lines, read as one.
    let mut lines: Vec<String> = Vec::new();
    for line in source.lines() {
        match lines.last_mut() {
            Some(open) if open.contains('{') && !open.contains('}') && open.contains(" use ") => {
                open.push(' ');
                open.push_str(line.trim());
            }
            _ => lines.push(line.to_string()),
        }
    }
    for line in &lines {
        let line = if nested {
            line.trim_start()
        } else {
            line.as_str()
        };
        let Some(rest) = line
            .strip_prefix("pub(crate) ")
            .or_else(|| line.strip_prefix("pub "))
        else {
            continue;
        };
        if let Some(used) = rest.strip_prefix("use self::") {
            let names = used.rsplit("::").next().unwrap_or(used);
            let names = names.trim_end_matches(';').trim_matches(['{', '}']);
            let names = names.split(',').map(str::trim).filter(|n| !n.is_empty());
            out.extend(names.map(str::to_string));
        } else if let Some(rest) = ["fn ", "const ", "struct ", "enum ", "static ", "type "]
            .iter()
            .find_map(|p| rest.strip_prefix(p))
        {
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'));
            out.insert(rest[..end.unwrap_or(rest.len())].to_string());
        }
    }
    out
}

/// What a module's doc says from "The interface" on: each backticked word, and the names of
/// those written as calls (`name(...)`).
fn documented(source: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let doc: String = source
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .skip_while(|l| !l.contains("The interface"))
        .collect::<Vec<_>>()
        .join(" ");
    let quoted: Vec<&str> = doc.split('`').skip(1).step_by(2).collect();
    let words = quoted.iter().map(|t| t.to_string()).collect();
    let calls = (quoted.iter())
        .filter(|t| t.ends_with(')') && !t.contains("::"))
        .filter_map(|t| t.split_once('(').map(|(name, _)| name.to_string()))
        .collect();
    (words, calls)
}

#[test]
fn each_sys_module_lists_the_interface_its_platforms_define() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let mut problems = Vec::new();
    for (doc, platforms) in MODULES {
        let defined: Vec<BTreeSet<String>> =
            platforms.iter().map(|p| items(&read(p), false)).collect();
        let every: BTreeSet<&String> = defined[0]
            .iter()
            .filter(|i| defined.iter().all(|d| d.contains(*i)))
            .collect();
        let any: BTreeSet<String> = (platforms.iter())
            .flat_map(|p| items(&read(p), true))
            .collect();
        assert!(every.len() > 5, "{doc}: {every:?}");
        let (words, calls) = documented(&read(doc));
        assert!(!words.is_empty(), "{doc} has no \"The interface\" list");
        for item in &every {
            if !words.contains(*item) && !calls.contains(*item) {
                problems.push(format!(
                    "{doc}: `{item}` is defined by {platforms:?} but not listed"
                ));
            }
        }
        for call in &calls {
            if !any.contains(call) {
                problems.push(format!(
                    "{doc}: lists `{call}(...)`, which no platform file defines"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn the_readers_see_what_they_are_for() {
    let source = "pub use self::tie::{findable, spawn_tied};\npub(crate) fn own_tree(c: &mut C) {}\n\
                  pub const HOME_VAR: &str = \"HOME\";\n    pub fn inner() {}\npub struct LineReader;\n";
    let found: Vec<String> = items(source, false).into_iter().collect();
    assert_eq!(
        found,
        [
            "HOME_VAR",
            "LineReader",
            "findable",
            "own_tree",
            "spawn_tied"
        ]
    );
    assert!(items(source, true).contains("inner"));
    let wrapped =
        "pub(crate) use os::{\n    adopt, kill_tree,\n    GLOBS,\n};\npub fn after() {}\n";
    let found: Vec<String> = items(&wrapped.replace("os::", "self::os::"), false)
        .into_iter()
        .collect();
    assert_eq!(found, ["GLOBS", "adopt", "after", "kill_tree"]);
    let doc =
        "//! Intro `not_this()`.\n//! The interface:\n//! - `state_dir()`, `read(path, max)`: x;\n\
               //! `HOME_VAR`, `std::fs::read(p)`";
    let (words, calls) = documented(doc);
    assert!(
        words.contains("HOME_VAR") && !words.contains("not_this()"),
        "{words:?}"
    );
    assert_eq!(calls.into_iter().collect::<Vec<_>>(), ["read", "state_dir"]);
}
