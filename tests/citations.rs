//! Comments cite documents that are in the repository: the protocol is `docs/protocol.md`, cited by
//! section name, e.g. `(docs/protocol.md, "Upgrade refusals")`. This test walks the repository and fails,
//! naming file and line, on a citation of a document outside it (the protocol's old numbered
//! sections, the source documents it was first written from, the shared folder beside the clone), and on
//! a citation of a section that does not exist, or is ambiguous, in `docs/protocol.md` or any other
//! document of the repository's top or `docs/` (`BENCHMARKS.md, "Idle"`; a heading renamed
//! without its citations). It also checks that every file `docs/protocol.md` names exists, so that its "Where the
//! code is" table follows the code when files move.

use std::fs;
use std::path::{Path, PathBuf};

/// Folders never scanned: build output, installed packages, VCS data, fuzz inputs.
const SKIPPED_DIRS: [&str; 6] = [
    ".git",
    "target",
    "node_modules",
    "corpus",
    "artifacts",
    "proptest-regressions",
];

/// Files that hold prose or code with comments.
const SCANNED_EXTENSIONS: [&str; 9] = ["rs", "md", "sh", "py", "toml", "vim", "txt", "yml", "yaml"];

/// Why a line cites something outside the repository, or `None`.
fn outside_citation(line: &str) -> Option<&'static str> {
    // Assembled so that this file does not match its own patterns.
    let old_spec = ["PROTOCOL", " §"].concat();
    if line.contains(&old_spec) || line.contains(&["PROTOCOL", ".md"].concat()) {
        return Some("the old protocol document: cite docs/protocol.md by section name");
    }
    if line.contains(&["REAL_", "CLIENT.md"].concat()) || line.contains(&["DESIGN", ".md"].concat())
    {
        return Some("a document outside the repository: cite docs/ (protocol.md, e2e.md)");
    }
    if line.contains("/work/shared") {
        return Some("a path outside the repository");
    }
    // The Autobahn runner is a tool CI places beside the clone, not a document.
    if line.contains("../shared/") && !line.contains("../shared/conformance/") {
        return Some("the shared folder outside the repository");
    }
    if cites_seed(line) {
        return Some(
            "a source document outside the repository: say what it says, or cite docs/protocol.md",
        );
    }
    // A numbered section on a line that names no RFC can only be the old protocol document's.
    if line.contains('§') && !line.contains("RFC") {
        return Some("a numbered section outside any RFC: cite docs/protocol.md by section name");
    }
    None
}

/// `seed 000`, `seeds 000 and 002`, `seeds 000/002`, `seeds/000_...` (any case).
fn cites_seed(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(i) = rest.find("seed") {
        let after = &rest[i + 4..];
        let after = after.strip_prefix('s').unwrap_or(after);
        let after = after.strip_prefix([' ', '/']).unwrap_or(after);
        if after.len() >= 3 && after.as_bytes()[..3].iter().all(u8::is_ascii_digit) {
            return true;
        }
        rest = &rest[i + 4..];
    }
    false
}

/// The documents cited by section name: every Markdown file at the top and in `docs/`, by the
/// path a citation names them with (`docs/protocol.md`, `BENCHMARKS.md`, ...).
fn cited_documents(root: &Path) -> Vec<String> {
    let mut docs = Vec::new();
    for dir in ["", "docs/"] {
        for entry in fs::read_dir(root.join(dir))
            .expect("the folder exists")
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".md") {
                docs.push(format!("{dir}{name}"));
            }
        }
    }
    docs.sort();
    docs
}

/// The section names of the document at `doc`: its headings without the `#`s (lines in fenced
/// code blocks are not headings).
fn sections_of(root: &Path, doc: &str) -> Vec<String> {
    let text = fs::read_to_string(root.join(doc)).expect("the document exists");
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(line.trim_start_matches('#').trim().to_string());
        }
    }
    out
}

/// Whether a citation of `name` names exactly one of `sections`: one of them is `name`, or one
/// alone starts with it and goes on with a subtitle, after a colon or ` (` (`"A day's use"` for
/// `A day's use (`day`; 2026-11-29)`; not `"Upgrade"` for `Upgrade refusals`). `Err` says why not.
fn names_one(sections: &[String], name: &str) -> Result<(), String> {
    // A heading's inline code is cited as text: "What --allow-host changes".
    let sections: Vec<String> = sections.iter().map(|s| s.replace('`', "")).collect();
    let name = name.replace('`', "");
    let name = name.as_str();
    if sections.iter().any(|s| s == name) {
        return Ok(());
    }
    let starting: Vec<&String> = sections
        .iter()
        .filter(|s| {
            s.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(':') || rest.starts_with(" ("))
        })
        .collect();
    match starting.len() {
        1 => Ok(()),
        0 => Err("which has no such heading".into()),
        _ => Err(format!("which has several such headings: {starting:?}")),
    }
}

/// Every `DOC, "A"`, `DOC "A"`, `..., "A" and "B"`, `..., "A", "B" and "C"` in `text`: the
/// names, each with its byte offset. `DOC` is a document's path, not the end of a longer one
/// (`README.md` is not `fuzz/README.md`).
fn cited_sections_of(text: &str, doc: &str) -> Vec<(String, usize)> {
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(doc) {
        let at = from + i;
        from = at + doc.len();
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c == '/' || c.is_alphanumeric()) {
            continue;
        }
        let rest = &text[from..];
        let Some(mut rest) = rest.strip_prefix(", ").or(rest.strip_prefix(' ')) else {
            continue;
        };
        while let Some(body) = rest.strip_prefix('"') {
            let Some(end) = body.find('"') else { break };
            names.push((body[..end].to_string(), text.len() - body.len()));
            rest = &body[end + 1..];
            match [", ", " and "]
                .iter()
                .find_map(|sep| rest.strip_prefix(sep))
            {
                Some(next) if next.starts_with('"') => rest = next,
                _ => break,
            }
        }
    }
    names
}

/// The section names cited from `docs/protocol.md` in `text`.
fn cited_sections(text: &str) -> Vec<String> {
    let cited = cited_sections_of(text, "docs/protocol.md");
    cited.into_iter().map(|(name, _)| name).collect()
}

/// One file's lines with comment markers stripped and joined, so that a citation wrapped over two
/// comment lines is read whole; with the line each byte offset came from.
fn joined(text: &str) -> (String, Vec<usize>) {
    let mut out = String::new();
    let mut line_of = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let t = ["//!", "///", "//", "#"]
            .iter()
            .find_map(|m| t.strip_prefix(m))
            .unwrap_or(t)
            .trim();
        // A citation inside a string literal (`\"Section\"`, a line continued with `\`) reads
        // as one in a comment.
        let t = t.strip_suffix('\\').map_or(t, str::trim_end);
        out.push_str(&t.replace("\\\"", "\""));
        out.push(' ');
        line_of.resize(out.len(), n + 1);
    }
    (out, line_of)
}

fn scanned_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if meta.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_ref()) {
                scanned_files(&path, out);
            }
        } else if meta.is_file()
            && path
                .extension()
                .is_some_and(|e| SCANNED_EXTENSIONS.contains(&e.to_string_lossy().as_ref()))
        {
            out.push(path);
        }
    }
}

#[test]
fn no_comment_cites_a_document_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let documents: Vec<(String, Vec<String>)> = cited_documents(root)
        .into_iter()
        .map(|doc| {
            let sections = sections_of(root, &doc);
            (doc, sections)
        })
        .collect();
    assert!(
        ["docs/protocol.md", "BENCHMARKS.md", "SECURITY.md"]
            .iter()
            .all(|d| documents.iter().any(|(doc, _)| doc == d)),
        "{documents:?}"
    );
    let this_file = root.join(file!());
    let mut files = Vec::new();
    scanned_files(root, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("src/server.rs")),
        "the walk found the engine's sources"
    );
    let mut problems = Vec::new();
    for file in files.iter().filter(|f| **f != this_file) {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        let shown = file.strip_prefix(root).unwrap_or(file).display();
        for (n, line) in text.lines().enumerate() {
            if let Some(why) = outside_citation(line) {
                problems.push(format!("{shown}:{}: {why}: {}", n + 1, line.trim()));
            }
        }
        // The changelog keeps history: a heading it cited may have been renamed since.
        if file.ends_with("CHANGELOG.md") {
            continue;
        }
        let (flat, line_of) = joined(&text);
        for (doc, sections) in &documents {
            for (name, at) in cited_sections_of(&flat, doc) {
                if let Err(why) = names_one(sections, &name) {
                    let line = line_of.get(at).copied().unwrap_or(0);
                    problems.push(format!("{shown}:{line}: cites {doc}, \"{name}\", {why}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

/// The repository paths a Markdown text names in backticks (`src/...`, `runtimes/...`, `program/...`, ...).
fn named_paths(text: &str) -> Vec<&str> {
    const TOP: [&str; 11] = [
        "src/",
        "runtimes/",
        "program/",
        "tests/",
        "text/",
        "docs/",
        "fuzz/",
        "benches/",
        "scripts/",
        "editors/",
        "examples/",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| TOP.iter().any(|top| t.starts_with(top)) && !t.contains(' '))
        .collect()
}

#[test]
fn every_file_the_protocol_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(root.join("docs/protocol.md")).expect("docs/protocol.md exists");
    let named = named_paths(&text);
    assert!(named.contains(&"src/limits.rs"), "{named:?}");
    let missing: Vec<&str> = named
        .into_iter()
        .filter(|p| !root.join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "docs/protocol.md names files that do not exist (update its \"Where the code is\" table): {missing:?}"
    );
}

/// The folders of the workspace's crates (where a `Cargo.toml` is), below `root`.
fn crate_folders(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("Cargo.toml").is_file() {
        out.push(dir.to_path_buf());
    }
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        if entry.file_type().is_ok_and(|t| t.is_dir())
            && !SKIPPED_DIRS.contains(&name.to_string_lossy().as_ref())
        {
            crate_folders(&entry.path(), out);
        }
    }
}

/// The README, the other documents of `docs/` and SECURITY.md name files a newcomer will open:
/// each exists, from the repository's top or from a crate's folder where a row is about that
/// crate (`tests/windows.rs` of `program/files`). BENCHMARKS.md and the changelog keep history,
/// and name files as they were.
#[test]
fn every_file_the_guides_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut crates = Vec::new();
    crate_folders(root, &mut crates);
    assert!(crates.len() > 5, "{crates:?}");
    let mut problems = Vec::new();
    let guides = cited_documents(root)
        .into_iter()
        .filter(|d| !["BENCHMARKS.md", "CHANGELOG.md", "docs/protocol.md"].contains(&d.as_str()));
    for doc in guides {
        let text = fs::read_to_string(root.join(&doc)).expect("the document exists");
        for path in named_paths(&text) {
            // A pattern or a placeholder names no one file.
            if path.contains(['*', '<', '{']) {
                continue;
            }
            if !crates.iter().any(|c| c.join(path).exists()) {
                problems.push(format!("{doc} names {path}, which does not exist"));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn the_patterns_catch_what_they_are_for() {
    let bad = [
        ["// see PROTOCOL", " §3"].concat(),
        ["/// as PROTOCOL", ".md says"].concat(),
        "//! the methods of seeds 000 and 002".to_string(),
        "# Seed 001: keepalive".to_string(),
        "# see ../shared/notes.md".to_string(),
        "// ---- §7: tools ----".to_string(),
    ];
    for line in &bad {
        assert!(outside_citation(line).is_some(), "{line}");
    }
    let good = [
        "//! RFC 6455 §5.5.1 and §7",
        "// (docs/protocol.md, \"Upgrade\")",
        "runner=\"$root/../shared/conformance/autobahn\"",
        "let seed = 3; // a proptest seed, 12 of them",
        "fuzz/src/seeds.rs",
    ];
    for line in good {
        assert!(outside_citation(line).is_none(), "{line}");
    }
    assert_eq!(
        cited_sections(r#"(docs/protocol.md, "JSON-RPC", "Batches" and "MCP lifecycle"), "other""#),
        ["JSON-RPC", "Batches", "MCP lifecycle"]
    );
    assert_eq!(
        named_paths("| Framing | `src/ws/receiver.rs` (rules), `Limits`, `tests/e2e/` |"),
        ["src/ws/receiver.rs", "tests/e2e/"]
    );
    let (flat, _) = joined("//! (docs/protocol.md, \"Upgrade\" and\n//! \"Upgrade refusals\").");
    assert_eq!(cited_sections(&flat), ["Upgrade", "Upgrade refusals"]);
    let names = |text: &str, doc: &str| -> Vec<String> {
        cited_sections_of(text, doc)
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    assert_eq!(
        names(r#"(BENCHMARKS.md "Idle")"#, "BENCHMARKS.md"),
        ["Idle"]
    );
    assert!(names(r#"(fuzz/README.md, "Corpus")"#, "README.md").is_empty());
    let sections = [
        "Idle (`benches/idle/`)".to_string(),
        "Item 8, session of 2026-11-25".to_string(),
        "Item 8, session of 2026-11-25 (afternoon): one copy".to_string(),
        "Issue 32, item 5 (2026-11-28, fourth session): the engine".to_string(),
        "Issue 32, item 5 (2026-11-30, fourth session): quieter".to_string(),
    ];
    assert!(names_one(&sections, "Idle").is_ok());
    assert!(names_one(&sections, "Item 8, session of 2026-11-25").is_ok());
    assert!(names_one(&sections, "Item 8, session of 2026-11-25 (afternoon)").is_ok());
    assert!(names_one(&sections, "Issue 32, item 5").is_err());
    assert!(names_one(&sections, "Issue 32, item 5, fourth session").is_err());
    assert!(names_one(&sections, "Limits").is_err());
    let renamed = ["Upgrade refusals".to_string()];
    assert!(names_one(&renamed, "Upgrade").is_err());
    let (flat, _) = joined("    \"see SECURITY.md, \\\"What \\\n     --allow-host changes\\\"\",");
    assert_eq!(names(&flat, "SECURITY.md"), ["What --allow-host changes"]);
    assert!(names_one(
        &["What `--allow-host` changes".into()],
        "What --allow-host changes"
    )
    .is_ok());
}
