//! `serve --stdio` under a storm of lines an editor with bugs could send: every message type,
//! valid and with its members replaced, removed or added, lines that are not JSON or not UTF-8,
//! and answers (`respond`, `diff_decision`) to calls that are pending, answered, cancelled or
//! never were, while a client keeps calling the tools that reach the editor.
//!
//! Each line is followed by a `status` line, so the lines the bridge wrote for it are the ones
//! before the next `status`. What must hold (docs/stdio.md):
//!
//! - every line the bridge writes is one JSON object of a known type, and an `error` line's text
//!   is at most 1 KiB and `...`;
//! - a line is answered by at most one `error` line; a line that is not a JSON object of a known
//!   type, or answers a call that is not pending, by exactly one; a valid line by none;
//! - a valid answer to a pending call ends it; a `respond` other than an error to an `openDiff`
//!   leaves it pending;
//! - at the end the client is still served, every call it made was answered exactly once (the
//!   ones still pending with a tool error when stdin closes), the bridge exits with status 0 and
//!   nothing panicked.
//!
//! The lines come from a seeded generator: `STDIO_STORM_SEED=N` repeats a run, and
//! `STDIO_STORM_LINES=N` makes it longer.

// Unix only, as the other tests that drive the built program (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::time::{Duration, Instant};

use common::storm::*;
use common::*;
use serde_json::{json, Value};

/// The types of line the bridge writes (docs/stdio.md, "Bridge → editor").
const TO_EDITOR: [&str; 9] = [
    "ready",
    "connected",
    "initialized",
    "disconnected",
    "tool_call",
    "cancelled",
    "tab_closed",
    "status",
    "error",
];

/// The longest `error` text: 1 KiB, then `...`.
const MAX_ERROR: usize = 1024 + 3;

/// What the bridge must answer a line with, before the `status` line after it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// No `error` line.
    Valid,
    /// Exactly one `error` line.
    Refused,
    /// At most one.
    Either,
}

fn position(r: &mut Rng) -> Value {
    json!({"line": r.below(40), "character": r.below(80)})
}

/// A line of `kind` as a correct editor would send it (`Valid` when it is one, by construction),
/// for a call `pending` names when it answers one.
fn template(r: &mut Rng, kind: &str, names: &Names, pending: &[(u64, String)]) -> (Value, Expect) {
    let file = r.pick(&names.files).clone();
    let diagnostic = |r: &mut Rng| {
        json!({"message": "boom", "severity": *r.pick(&["Error", "Warning", "Information", "Hint"]),
               "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
               "source": "storm", "code": r.below(100)})
    };
    match kind {
        "selection_changed" => {
            let (a, b) = (position(r), position(r));
            let (start, end) = if (a["line"].as_u64(), a["character"].as_u64())
                <= (b["line"].as_u64(), b["character"].as_u64())
            {
                (a, b)
            } else {
                (b, a)
            };
            (
                json!({"type": kind, "filePath": file, "text": "fn main() {}",
                       "selection": {"start": start, "end": end}}),
                Expect::Valid,
            )
        }
        "at_mentioned" => {
            let a = r.below(50) as u64 + 1;
            let b = a + r.below(10) as u64;
            (
                json!({"type": kind, "filePath": file, "lineStart": a, "lineEnd": b}),
                Expect::Valid,
            )
        }
        "diagnostics" => {
            let n = r.below(4);
            let list: Vec<Value> = (0..n).map(|_| diagnostic(r)).collect();
            let uri = if r.chance(50) { uri_of(&file) } else { file };
            (
                json!({"type": kind, "uri": uri, "diagnostics": list}),
                Expect::Valid,
            )
        }
        "open_editors" => {
            let tabs: Vec<Value> = (0..r.below(4))
                .map(|i| {
                    json!({"uri": uri_of(&r.pick(&names.files).clone()), "isActive": i == 0,
                           "isDirty": r.chance(50), "label": "a.rs", "languageId": "rust",
                           "lineCount": r.below(100)})
                })
                .collect();
            (json!({"type": kind, "tabs": tabs}), Expect::Valid)
        }
        "respond" | "diff_decision" => {
            // Pending, or never a call (ids the bridge has not reached, or not numbers).
            let target = if !pending.is_empty() && r.chance(80) {
                Some(r.pick(pending).clone())
            } else {
                None
            };
            let id = match &target {
                Some((id, _)) => json!(id),
                None => json!(*r.pick(&[1_000_000u64, 4_000_000_000, u64::MAX])),
            };
            let is_diff = target.as_ref().is_some_and(|(_, name)| name == "openDiff");
            let (line, fits) = if kind == "respond" {
                match r.below(3) {
                    0 => (json!({"type": kind, "id": id, "text": "done"}), !is_diff),
                    1 => (json!({"type": kind, "id": id, "error": "no"}), true),
                    _ => (
                        json!({"type": kind, "id": id, "result":
                                {"content": [{"type": "text", "text": "ok"}], "isError": false}}),
                        !is_diff,
                    ),
                }
            } else {
                let decision = if r.chance(50) { "reject" } else { "accept" };
                (
                    json!({"type": kind, "id": id, "decision": decision, "contents": "new\n"}),
                    is_diff,
                )
            };
            let expect = match (&target, fits) {
                (Some(_), true) => Expect::Valid,
                _ => Expect::Refused,
            };
            (line, expect)
        }
        _ => (json!({"type": "status"}), Expect::Valid),
    }
}

/// Where `what` starts in `line`.
fn text_at(line: &[u8], what: &[u8]) -> usize {
    line.windows(what.len()).position(|w| w == what).unwrap()
}

/// One line to send (as bytes: some are not UTF-8) and what it must be answered with.
fn generate(r: &mut Rng, names: &Names, pending: &[(u64, String)]) -> (Vec<u8>, Expect, String) {
    const KINDS: [&str; 7] = [
        "selection_changed",
        "at_mentioned",
        "diagnostics",
        "open_editors",
        "respond",
        "diff_decision",
        "status",
    ];
    let roll = r.below(100);
    if roll < 12 {
        let kind = *r.pick(&KINDS);
        let (mut v, _) = template(r, kind, names, pending);
        let text = v.to_string();
        let (line, expect): (Vec<u8>, Expect) = match r.below(10) {
            0 => (b"this is not json".to_vec(), Expect::Refused),
            1 => (
                r.pick(&["[]", "null", "1", "\"x\"", "{}"])
                    .as_bytes()
                    .to_vec(),
                Expect::Refused,
            ),
            2 => {
                v["type"] = json!(*r.pick(&["no_such_type", "", "STATUS", "tool_call"]));
                (v.to_string().into_bytes(), Expect::Refused)
            }
            3 => {
                v.as_object_mut().unwrap().remove("type");
                (v.to_string().into_bytes(), Expect::Refused)
            }
            4 => {
                // Cut anywhere, inside a character too (then it is not UTF-8 either).
                let cut = 1 + r.below(text.len() - 1);
                (text.as_bytes()[..cut].to_vec(), Expect::Refused)
            }
            5 => {
                let deep = r.pick(&[100usize, 127, 129, 10_000]);
                let mut s = "[".repeat(*deep);
                s.push_str(&"]".repeat(*deep));
                (s.into_bytes(), Expect::Refused)
            }
            6 => {
                // Not UTF-8 (a Latin-1 é) outside a selection's text: refused.
                let mut b = json!({"type": "at_mentioned", "filePath": "/x"})
                    .to_string()
                    .into_bytes();
                b.insert(b.len() - 3, 0xE9);
                (b, Expect::Refused)
            }
            7 => {
                // A byte-order mark, spaces and a carriage return around a line change nothing.
                let kind = *r.pick(&KINDS);
                let (v, e) = template(r, kind, names, pending);
                (format!("\u{feff} {v}\r").into_bytes(), e)
            }
            8 => {
                // Vim's `json_encode` of a buffer read as UTF-8 that is not: a selection's text
                // is taken with U+FFFD, a file's name is refused.
                let (v, _) = template(r, "selection_changed", names, pending);
                let mut b = v.to_string().into_bytes();
                let in_name = r.chance(50);
                let (at, expect) = if in_name {
                    // After the name's first character (ASCII: `/` or a drive letter).
                    let quoted = v["filePath"].to_string();
                    (text_at(&b, quoted.as_bytes()) + 2, Expect::Refused)
                } else {
                    (text_at(&b, b"fn main") + 2, Expect::Valid)
                };
                b.insert(at, *r.pick(&[0xFFu8, 0xC3, 0x80]));
                (b, expect)
            }
            _ => (b"   ".to_vec(), Expect::Valid),
        };
        let what = String::from_utf8_lossy(&line).chars().take(200).collect();
        return (line, expect, what);
    }
    let kind = *r.pick(&KINDS);
    let (mut v, mut expect) = template(r, kind, names, pending);
    // A `status` line is not changed: one that is still a `status` would be answered with a
    // `status` line, which marks the end of a line's answers here.
    if roll >= 45 && kind != "status" {
        for _ in 0..=r.below(3) {
            mutate_line(r, &mut v, names);
        }
        expect = match v.get("type").and_then(Value::as_str) {
            Some(t) if KINDS.contains(&t) => Expect::Either,
            _ => Expect::Refused,
        };
    }
    let text = v.to_string();
    let what = text.chars().take(200).collect();
    (text.into_bytes(), expect, what)
}

/// The bridge's stdout lines from `from` on, parsed.
fn lines_from(s: &Served, from: usize) -> Vec<Value> {
    let all = s.stdout.0.lock().unwrap();
    all[from.min(all.len())..]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect()
}

/// Waits until `n` more `status` lines came after line `from`; returns the lines up to the
/// `n`-th and the index after it.
fn until_status(s: &Served, from: usize, n: usize, after: &str) -> (Vec<Value>, usize) {
    let give_up = Instant::now() + WAIT;
    loop {
        let got = lines_from(s, from);
        let mut seen = 0;
        for (i, v) in got.iter().enumerate() {
            if v["type"] == "status" {
                seen += 1;
                if seen == n {
                    return (got[..=i].to_vec(), from + i + 1);
                }
            }
        }
        assert!(
            Instant::now() < give_up,
            "no status after {after}; stderr:\n{}",
            s.stderr.text()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether `m` tells of a decision the bridge could not give, which may come after later lines
/// (`diff_decision: id N: ...`: an accept's check runs on a job), unlike the refusal of a
/// `diff_decision` line itself (`diff_decision: id N is not an openDiff`).
fn is_late_decision(m: &str) -> bool {
    m.strip_prefix("diff_decision: id ").is_some_and(|rest| {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with(": ")
    })
}

/// The calls the last `status` line says are pending: (id, tool name).
fn pending_of(status: &Value) -> Vec<(u64, String)> {
    (status["pending"].as_array().unwrap().iter())
        .map(|p| {
            (
                p["id"].as_u64().unwrap(),
                p["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The client's calls that reach the editor, with arguments about `file` (a path of the bridge).
fn forwarded_call(r: &mut Rng, file: &str, tab: usize) -> (&'static str, Value) {
    match r.below(5) {
        0 | 1 => (
            "openDiff",
            json!({"old_file_path": file, "new_file_path": file,
                   "new_file_contents": "new\n", "tab_name": format!("storm-{tab}")}),
        ),
        2 => ("openFile", json!({"filePath": file, "startLine": 2})),
        3 => ("saveDocument", json!({"filePath": file})),
        _ => ("executeCode", json!({"code": "1 + 1"})),
    }
}

/// Reads what the client has been sent until nothing comes for `quiet`, counting the answers
/// to each request id.
fn count_answers(c: &mut Client, quiet: Duration, answers: &mut HashMap<u64, usize>) {
    while let Some(v) = c.recv_json(quiet) {
        if let Some(id) = v["id"].as_u64() {
            *answers.entry(id).or_default() += 1;
        }
    }
}

/// A sandbox whose workspace has a few files.
fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    for f in ["a.rs", "b.py", "dir/c.ts"] {
        let p = sb.ws.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "old\n").unwrap();
    }
    sb
}

fn storm(sb: &Sandbox, args: &[&str], names: Names, seed: u64) {
    let lines = from_env("STDIO_STORM_LINES", 1000) as usize;
    let here = sb.ws.join("a.rs").to_string_lossy().to_string();
    let mut s = Served::start(sb, args);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let mut r = Rng(seed);
    let mut pending: Vec<(u64, String)> = Vec::new();
    let mut asked: BTreeSet<u64> = BTreeSet::new();
    let mut answers: HashMap<u64, usize> = HashMap::new();
    let mut read = 0;
    let mut tab = 0;
    // How many lines were of each expectation, and how many answered a pending call: what a run
    // covered, printed at its end.
    let mut tally: HashMap<String, usize> = HashMap::new();
    let context = |seed: u64, i: usize, what: &str| format!("seed {seed}, line {i}: {what}");
    for i in 0..lines {
        if pending.len() < 3 && r.chance(10) {
            tab += 1;
            let (name, args) = forwarded_call(&mut r, &here, tab);
            asked.insert(c.call_tool(name, args));
        }
        let (line, expect, what) = generate(&mut r, &names, &pending);
        let is_status = what.contains("\"type\":\"status\"") && expect == Expect::Valid;
        {
            let stdin = s.stdin.as_mut().unwrap();
            stdin.write_all(&line).unwrap();
            stdin.write_all(b"\n{\"type\":\"status\"}\n").unwrap();
            stdin.flush().unwrap();
        }
        let (got, next) = until_status(&s, read, 1 + is_status as usize, &context(seed, i, &what));
        read = next;
        let mut errors = 0;
        for v in &got {
            let kind = v["type"].as_str().unwrap_or_default();
            assert!(
                TO_EDITOR.contains(&kind),
                "{}: {v}",
                context(seed, i, &what)
            );
            if kind == "error" {
                let m = v["message"].as_str().unwrap();
                assert!(
                    m.len() <= MAX_ERROR,
                    "{}: {} bytes",
                    context(seed, i, &what),
                    m.len()
                );
                if !is_late_decision(m) {
                    errors += 1;
                }
            }
        }
        let want = match expect {
            Expect::Valid => 0..=0,
            Expect::Refused => 1..=1,
            Expect::Either => 0..=1,
        };
        assert!(
            want.contains(&errors),
            "{}: {errors} error lines, wanted {want:?}: {got:?}",
            context(seed, i, &what)
        );
        *tally.entry(format!("{expect:?}")).or_default() += 1;
        *tally.entry(format!("{errors} error lines")).or_default() += 1;
        let was = std::mem::take(&mut pending);
        pending = pending_of(got.last().unwrap());
        // A valid answer ends its call; a refused one leaves it pending.
        if let Ok(v) = serde_json::from_slice::<Value>(&line) {
            if let Some(id) = v["id"]
                .as_u64()
                .filter(|id| was.iter().any(|(p, _)| p == id))
            {
                *tally
                    .entry(format!("{expect:?} answer to a pending call"))
                    .or_default() += 1;
                match expect {
                    Expect::Valid => assert!(
                        !pending.iter().any(|(p, _)| *p == id),
                        "{}: still pending",
                        context(seed, i, &what)
                    ),
                    Expect::Refused => assert!(
                        pending.iter().any(|(p, _)| *p == id),
                        "{}: no longer pending",
                        context(seed, i, &what)
                    ),
                    Expect::Either => {}
                }
            }
        }
        // The client's messages are read as they come (its answers counted), so it never holds
        // the bridge up.
        count_answers(&mut c, Duration::from_millis(1), &mut answers);
    }
    // Still served.
    let folders = json_of(&call(&mut c, "getWorkspaceFolders", json!({})));
    assert_eq!(folders["success"], true, "{folders}");
    // stdin's end: the calls still pending are answered with tool errors, and the bridge stops.
    drop(s.stdin.take());
    let stderr = s.stderr.clone();
    let status = exit_within(&mut s.child, Duration::from_secs(20), &|| stderr.text());
    assert_eq!(status.code(), Some(0), "stderr:\n{}", s.stderr.text());
    count_answers(&mut c, Duration::from_secs(2), &mut answers);
    for id in &asked {
        assert_eq!(
            answers.get(id),
            Some(&1),
            "seed {seed}: call {id} answered {:?} times",
            answers.get(id)
        );
    }
    let mut tally: Vec<_> = tally.into_iter().collect();
    tally.sort();
    eprintln!("seed {seed}: {} calls, {tally:?}", asked.len());
    assert!(
        !s.stderr.text().contains("panicked"),
        "seed {seed}:\n{}",
        s.stderr.text()
    );
}

#[test]
fn a_storm_of_odd_lines_is_answered_line_by_line() {
    let sb = sandbox();
    let files = ["a.rs", "b.py", "dir/c.ts", "new.rs"]
        .iter()
        .map(|f| sb.ws.join(f).to_string_lossy().to_string())
        .collect();
    let names = Names {
        files,
        odd: odd_strings(&sb),
    };
    storm(
        &sb,
        &["--stdio", "--no-lsp"],
        names,
        from_env("STDIO_STORM_SEED", 0x5EED),
    );
}

/// The same through `--path-map` from a Windows editor's folder and WSL's drives, on the smol
/// runtime: the editor's paths are Windows paths and URIs in their many spellings.
#[test]
fn a_storm_of_odd_lines_through_a_path_map() {
    let sb = sandbox();
    let map = format!(r"C:\Users\me\app={}", sb.ws.to_string_lossy());
    let files = [
        r"C:\Users\me\app\a.rs",
        r"c:/users/ME/app/b.py",
        r"C:\Users\me\app\dir\c.ts",
        r"C:\Users\me\app\dir\..\new.rs",
    ]
    .iter()
    .map(|f| f.to_string())
    .collect();
    let mut odd = odd_strings(&sb);
    odd.extend(
        [
            r"C:\Users\me\other\x.rs",
            r"C:\Users\me\app\..\..\secret",
            r"D:\x.rs",
            r"C:\Users\me\app\NUL",
            r"C:\Users\me\app\a.rs:stream",
            "file:///c%3A/Users/me/app/a.rs",
            "file://localhost/C:/Users/me/app/a.rs",
            r"\\wsl$\Debian\etc",
            "//server/share/a.rs",
            r"C:",
            r"C:a.rs",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let args = [
        "--stdio",
        "--no-lsp",
        "--runtime",
        "smol",
        "--path-map",
        &map,
        "--path-map",
        "wsl",
    ];
    storm(
        &sb,
        &args,
        Names { files, odd },
        from_env("STDIO_STORM_SEED", 0x5EED) ^ 0xA11,
    );
}
