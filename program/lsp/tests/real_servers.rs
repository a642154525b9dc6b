//! Against real language servers: pyright, TypeScript 7's `tsc --lsp`, typescript-language-server
//! and vtsls (npm), clangd
//! (Debian), ruff (PyPI). `scripts/test-all.sh` installs them on a fresh machine; a missing server
//! fails these tests rather than skipping them.

use claude_ide_bridge_testsupport::procs;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claude_ide_bridge_lsp::{
    Diagnostic, FileChange, FileDiagnostics, Lsp, LspConfig, LspLog, ServerState, ServerTable,
};

struct Fixture {
    lsp: Lsp,
    changes: Arc<Mutex<Vec<FileDiagnostics>>>,
    log: Arc<Mutex<Vec<u8>>>,
    dir: tempfile::TempDir,
}

fn fixture(servers: ServerTable) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let changes = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::new(Mutex::new(Vec::new()));
    let config = LspConfig {
        servers,
        workspace_folders: vec![dir.path().to_path_buf()],
        diagnostics_wait: Duration::from_secs(20),
        start_wait: Duration::from_secs(30),
        log: LspLog::Writer(log.clone()),
        ..LspConfig::default()
    };
    let seen = changes.clone();
    let lsp = Lsp::new(config, move |change| seen.lock().unwrap().push(change));
    Fixture {
        lsp,
        changes,
        log,
        dir,
    }
}

fn require(program: &str) {
    assert!(
        claude_ide_bridge_lsp::table::find_program(program).is_some(),
        "{program} is not installed: scripts/test-all.sh installs it (these tests fail rather than skip)"
    );
}

fn pids(lsp: &Lsp) -> Vec<u32> {
    lsp.status().iter().filter_map(|s| s.pid).collect()
}

/// One real server's case for [`error_fixed_new_error`]: its language and command, a file name, an
/// error and a word of its message, the fixed text, a new error and a word of its message.
struct Case {
    program: &'static str,
    language: &'static str,
    command: &'static str,
    file: &'static str,
    bad: &'static str,
    want: &'static str,
    good: &'static str,
    bad2: &'static str,
    want2: &'static str,
}

/// The same three steps for every server: a known error on the first call, fixed text clears it, a
/// new error shows; `on_change` saw them. The fixture (for [`stop_and_check_gone`]) and the new
/// error's diagnostics, asked for again, for the server's own details.
fn error_fixed_new_error(case: &Case) -> (Fixture, Vec<Diagnostic>) {
    let Case {
        program,
        language,
        command,
        file,
        bad,
        want,
        good,
        bad2,
        want2,
    } = *case;
    require(program);
    let f = fixture(only(language, command));
    let file: PathBuf = f.dir.path().join(file);
    let file = file.as_path();
    let deadline = || Instant::now() + Duration::from_secs(20);
    let t0 = Instant::now();
    // A cold server's first check, on a busy 2-core machine with the other tests' servers
    // starting at once, may take longer (vtsls starts two tsservers: 21 s seen).
    let first = f
        .lsp
        .diagnostics(file, bad, Instant::now() + Duration::from_secs(60));
    eprintln!(
        "{}: first diagnostics after {:?}",
        file.display(),
        t0.elapsed()
    );
    assert!(
        first
            .iter()
            .any(|d| d.message.contains(want) && d.severity == "Error"),
        "first call: {first:#?}\nlog: {}",
        String::from_utf8_lossy(&f.log.lock().unwrap())
    );
    let t1 = Instant::now();
    let fixed = f.lsp.diagnostics(file, good, deadline());
    eprintln!("{}: fixed after {:?}", file.display(), t1.elapsed());
    assert!(
        fixed.iter().all(|d| d.severity != "Error"),
        "after the fix: {fixed:#?}"
    );
    let t2 = Instant::now();
    let second = f.lsp.diagnostics(file, bad2, deadline());
    eprintln!("{}: new error after {:?}", file.display(), t2.elapsed());
    assert!(
        second.iter().any(|d| d.message.contains(want2)),
        "new error: {second:#?}\nlog: {}",
        String::from_utf8_lossy(&f.log.lock().unwrap())
    );
    let uri = claude_ide_bridge::file_uri(file.to_str().unwrap());
    // `on_change` is called on the thread reading the server, after the diagnostics it tells of
    // are held: the call above may have them a moment before it (seen with vtsls).
    let told = |c: &FileDiagnostics| {
        c.uri == uri && c.diagnostics.iter().any(|d| d.message.contains(want2))
    };
    let give_up = deadline();
    while !f.changes.lock().unwrap().iter().any(told) && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(10));
    }
    let changes = f.changes.lock().unwrap();
    let mine: Vec<_> = changes.iter().filter(|c| c.uri == uri).collect();
    assert!(
        mine.iter()
            .any(|c| c.diagnostics.iter().any(|d| d.message.contains(want))),
        "{mine:#?}"
    );
    assert!(
        mine.iter()
            .any(|c| c.diagnostics.iter().any(|d| d.message.contains(want2))),
        "{mine:#?}"
    );
    assert!(f.lsp.known().iter().any(|k| k.uri == uri));
    drop(changes);
    let again = f.lsp.diagnostics(file, bad2, Instant::now());
    (f, again)
}

/// `shutdown` ends every server and every process a server started (typescript-language-server runs
/// tsserver as its own children): none is left running.
fn stop_and_check_gone(f: &Fixture) {
    let servers = running(&pids(&f.lsp));
    assert!(!servers.is_empty());
    let started: Vec<procs::Proc> = servers
        .iter()
        .flat_map(|p| procs::descendants(p.pid))
        .collect();
    let t = Instant::now();
    f.lsp.shutdown(Duration::from_secs(5));
    eprintln!(
        "shutdown took {:?} ({} servers, {} processes of theirs)",
        t.elapsed(),
        servers.len(),
        started.len()
    );
    for p in servers {
        assert!(
            !procs::alive(p),
            "server {} is still there after shutdown",
            p.pid
        );
    }
    // SIGKILL to the group has been sent when shutdown returns; dying takes the kernel a moment.
    let give_up = Instant::now() + Duration::from_secs(5);
    while started.iter().any(|&p| procs::alive(p)) && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(20));
    }
    for p in started {
        assert!(
            !procs::alive(p),
            "{} ({}) is still there after shutdown",
            p.pid,
            procs::cmdline(p.pid)
        );
    }
    assert!(f
        .lsp
        .status()
        .iter()
        .all(|s| s.state == ServerState::Stopped || s.state == ServerState::Missing));
}

/// `pids` as processes, each of which must be running now.
fn running(pids: &[u32]) -> Vec<procs::Proc> {
    pids.iter()
        .map(|&pid| procs::seen(pid).unwrap_or_else(|| panic!("process {pid} is not running")))
        .collect()
}

fn only(language: &str, command: &str) -> ServerTable {
    let mut table = ServerTable::empty();
    table.set(claude_ide_bridge_lsp::parse_override(&format!("{language}={command}")).unwrap());
    let builtin = ServerTable::builtin();
    let mut out = ServerTable::empty();
    for lang in builtin.languages() {
        if lang.id == language {
            let mut lang = lang.clone();
            lang.commands = table.commands(language).to_vec();
            lang.also = Vec::new();
            out.push(lang);
        }
    }
    out
}

#[test]
fn pyright_error_fix_new_error_and_shutdown() {
    let (f, d) = error_fixed_new_error(&Case {
        program: "pyright-langserver",
        language: "python",
        command: "pyright-langserver --stdio",
        file: "app.py",
        bad: "x: int = 'one'\n",
        want: "is not assignable to declared type",
        good: "x: int = 1\n",
        bad2: "x: int = 1\ny: str = x\n",
        want2: "is not assignable to declared type \"str\"",
    });
    assert!(d.iter().any(|d| d.source.as_deref() == Some("Pyright")));
    stop_and_check_gone(&f);
}

#[test]
fn clangd_error_fix_new_error_and_shutdown() {
    let (f, d) = error_fixed_new_error(&Case {
        program: "clangd",
        language: "c",
        command: "clangd",
        file: "main.c",
        bad: "int main(void) { return missing_one; }\n",
        want: "Use of undeclared identifier 'missing_one'",
        good: "int main(void) { return 0; }\n",
        bad2: "int main(void) {\n  int ok = 1;\n  return ok + missing_two;\n}\n",
        want2: "Use of undeclared identifier 'missing_two'",
    });
    assert_eq!((d[0].range.start.line, d[0].range.start.character), (2, 14));
    stop_and_check_gone(&f);
}

/// clangd's open documents checked again for a header changed on disk (found by the program's
/// look, `Lsp::files_changed`) move the count of the C files' servers (`Lsp::rechecks_for`), and
/// not Python's: a caller's answer remembered for a Python file's text stands (it was forgotten
/// with every header change, and a Python baseline then asked the server again).
#[test]
fn a_header_change_moves_the_rechecks_of_its_language_alone() {
    require("clangd");
    require("pyright-langserver");
    let mut table = only("c", "clangd");
    for language in only("python", "pyright-langserver --stdio").languages() {
        table.push(language.clone());
    }
    let f = fixture(table);
    let (main, header, app) = (
        f.dir.path().join("main.c"),
        f.dir.path().join("x.h"),
        f.dir.path().join("app.py"),
    );
    std::fs::write(&header, "int other(void);\n").unwrap();
    let source = "#include \"x.h\"\nint main(void) { return other(); }\n";
    std::fs::write(&main, source).unwrap();
    std::fs::write(&app, "x: int = 1\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    assert!(f.lsp.check(&main, source, deadline).fresh);
    assert!(f.lsp.check(&app, "x: int = 1\n", deadline).fresh);
    let (c, python) = (f.lsp.rechecks_for(&main), f.lsp.rechecks_for(&app));
    std::fs::write(&header, "int other(void);\nint helper(void);\n").unwrap();
    f.lsp
        .files_changed(&[(header.clone(), FileChange::Changed)]);
    assert_eq!(f.lsp.rechecks_for(&main), c + 1);
    assert_eq!(f.lsp.rechecks_for(&header), c + 1);
    assert_eq!(f.lsp.rechecks_for(&app), python);
    assert_eq!(f.lsp.rechecks(), c + python + 1);
    // And clangd answers for the source's new version.
    assert!(f.lsp.check(&main, source, deadline).fresh);
    f.lsp.shutdown(Duration::from_secs(5));
}

#[test]
fn typescript_error_fix_new_error_and_shutdown() {
    typescript_error_fix_new_error(
        "typescript-language-server",
        "typescript-language-server --stdio",
        "typescript",
    );
}

/// typescript-language-server runs the TypeScript installed beside it, not a workspace's own
/// `node_modules/typescript` (which it prefers unless told: a workspace's code, run as soon as
/// claude connects and the server starts). Here the workspace's `tsserver.js` leaves a mark and
/// exits; the answer comes from the installed one, and no mark is left. It was left before.
#[test]
fn typescript_runs_the_installed_tsserver_not_the_workspaces() {
    require("typescript-language-server");
    let f = fixture(only("typescript", "typescript-language-server --stdio"));
    let lib = f
        .dir
        .path()
        .join("node_modules")
        .join("typescript")
        .join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(
        lib.parent().unwrap().join("package.json"),
        r#"{"name": "typescript", "version": "5.9.3"}"#,
    )
    .unwrap();
    let mark = f.dir.path().join("ran-the-workspaces-tsserver");
    std::fs::write(
        lib.join("tsserver.js"),
        format!(
            "require('fs').writeFileSync({:?}, String(process.pid)); process.exit(1);\n",
            mark.display().to_string()
        ),
    )
    .unwrap();
    let file = f.dir.path().join("a.ts");
    let got = f.lsp.diagnostics(
        &file,
        "const n: number = 'one';\n",
        Instant::now() + Duration::from_secs(60),
    );
    assert!(!mark.exists(), "the workspace's tsserver.js ran");
    assert!(
        got.iter().any(|d| d
            .message
            .contains("Type 'string' is not assignable to type 'number'.")),
        "{got:#?}\nlog: {}",
        String::from_utf8_lossy(&f.log.lock().unwrap())
    );
}

/// TypeScript 7's own server (`tsc --lsp --stdio`: npm's `tsc` starts the native compiler as its
/// child), the table's first for TypeScript: `scripts/test-all.sh` installs it in a folder of its
/// own and names its `tsc` in `CLAUDE_IDE_BRIDGE_TSC7` (the global `typescript` is the 5.9 the
/// other two servers drive); else a `tsc` on `PATH` of TypeScript 7 or later. It refused every
/// pull the client sent with a `null` in it, so its diagnostics were never known.
#[test]
fn typescript_7_error_fix_new_error_and_shutdown() {
    let tsc = std::env::var("CLAUDE_IDE_BRIDGE_TSC7").ok().or_else(|| {
        let found = claude_ide_bridge_lsp::table::find_program("tsc")?;
        let lsp = ["tsc", "--lsp", "--stdio"].map(String::from);
        claude_ide_bridge_lsp::table::serves(&lsp, &found).then(|| "tsc".to_owned())
    });
    let tsc = tsc.expect(
        "TypeScript 7 is not installed: scripts/test-all.sh installs it and sets \
         CLAUDE_IDE_BRIDGE_TSC7 (these tests fail rather than skip)",
    );
    let program: &'static str = Box::leak(tsc.clone().into_boxed_str());
    let command: &'static str = Box::leak(format!("{tsc} --lsp --stdio").into_boxed_str());
    typescript_error_fix_new_error(program, command, "ts");
}

#[test]
fn vtsls_error_fix_new_error_and_shutdown() {
    typescript_error_fix_new_error("vtsls", "vtsls --stdio", "ts");
}

/// vtsls 0.3 exits ("Bad line number") when a module another open file imports gets a new text
/// as a change without a range; it asked for incremental changes, and the bridge sends the new
/// text as one edit over the whole old one: vtsls stays up, and the importer's new errors show.
#[test]
fn vtsls_takes_a_new_text_of_an_imported_module() {
    require("vtsls");
    let f = fixture(only("typescript", "vtsls --stdio"));
    let dir = f.dir.path();
    std::fs::write(
        dir.join("tsconfig.json"),
        r#"{"compilerOptions": {"strict": true}, "include": ["src"]}"#,
    )
    .unwrap();
    std::fs::create_dir(dir.join("src")).unwrap();
    let (util, index) = (dir.join("src/util.ts"), dir.join("src/index.ts"));
    let util_text =
        "export function greet(name: string): string {\n  return \"hello \" + name;\n}\n\n\
                     export function count(items: number[]): number {\n  return items.length;\n}\n";
    let index_text =
        "import { greet, count } from \"./util\";\n\nconst limit: number = \"ten\";\n\n\
                      function main(): void {\n  const total = count([1, 2, 3]);\n  \
                      console.log(greet(\"bob\"), total, limit);\n}\n\nmain();\n";
    std::fs::write(&util, util_text).unwrap();
    std::fs::write(&index, index_text).unwrap();
    let deadline = |s| Instant::now() + Duration::from_secs(s);
    let first = f.lsp.diagnostics(&index, index_text, deadline(60));
    assert!(
        first
            .iter()
            .any(|d| d.message.contains("Type 'string' is not assignable")),
        "{first:#?}"
    );
    let server = pids(&f.lsp);
    f.lsp.diagnostics(&util, util_text, deadline(20));
    let changed = util_text.replace("items: number[]", "items: string[]");
    std::fs::write(&util, &changed).unwrap();
    f.lsp.diagnostics(&util, &changed, deadline(20));
    let give_up = deadline(20);
    let crossed = loop {
        let now = f.lsp.diagnostics(&index, index_text, deadline(5));
        if now.iter().any(|d| {
            d.message
                .contains("Type 'number' is not assignable to type 'string'")
        }) || Instant::now() > give_up
        {
            break now;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let log = String::from_utf8_lossy(&f.log.lock().unwrap()).into_owned();
    assert!(!log.contains("Bad line number"), "{log}");
    assert_eq!(pids(&f.lsp), server, "vtsls was started again: {log}");
    assert!(
        crossed.iter().any(|d| d
            .message
            .contains("Type 'number' is not assignable to type 'string'")),
        "{crossed:#?}\nlog: {log}"
    );
    stop_and_check_gone(&f);
}

/// [`error_fixed_new_error`] for a TypeScript server, which names its diagnostics `source`.
fn typescript_error_fix_new_error(program: &'static str, command: &'static str, source: &str) {
    // A loose file (no tsconfig.json): tsserver checks it in an inferred project.
    let (f, d) = error_fixed_new_error(&Case {
        program,
        language: "typescript",
        command,
        file: "app.ts",
        bad: "const count: number = \"one\";\n",
        want: "Type 'string' is not assignable to type 'number'.",
        good: "const count: number = 1;\n",
        bad2: "const count: number = 1;\nconst label: string = count;\n",
        want2: "Type 'number' is not assignable to type 'string'.",
    });
    // Where tsserver puts it (0-based, at the declared name) and who it says it is.
    assert_eq!((d[0].range.start.line, d[0].range.start.character), (1, 6));
    assert_eq!(d[0].source.as_deref(), Some(source));
    stop_and_check_gone(&f);
}

#[test]
fn ruff_pulls_diagnostics_and_formats() {
    require("ruff");
    let f = fixture(only("python", "ruff server"));
    let file: PathBuf = f.dir.path().join("lint.py");
    let deadline = || Instant::now() + Duration::from_secs(20);
    let first = f.lsp.diagnostics(&file, "import os\n", deadline());
    assert!(
        first.iter().any(|d| d.code == Some("F401".into())),
        "{first:#?}"
    );
    assert!(f
        .lsp
        .diagnostics(&file, "import os\n\nprint(os.sep)\n", deadline())
        .is_empty());
    let second = f
        .lsp
        .diagnostics(&file, "import sys\n\nx == 1\n", deadline());
    assert!(
        second.iter().any(|d| d.code == Some("F401".into())),
        "{second:#?}"
    );
    let formatted = f
        .lsp
        .format(&file, "x=1\ny = [1,\n  2]\n", deadline())
        .unwrap();
    assert_eq!(formatted.as_deref(), Some("x = 1\ny = [1, 2]\n"));
    // A file with a byte-order mark: its diagnostics where they are in the same text without
    // one (ruff counted the mark: F401 one character to the right), and its format keeps it.
    let plain = f
        .lsp
        .diagnostics(&f.dir.path().join("plain.py"), "import os\n", deadline());
    let marked = f.lsp.diagnostics(
        &f.dir.path().join("marked.py"),
        "\u{feff}import os\n",
        deadline(),
    );
    let ranges = |d: &[claude_ide_bridge_lsp::Diagnostic]| -> Vec<String> {
        d.iter()
            .map(|d| format!("{:?} {:?}", d.code, d.range))
            .collect()
    };
    assert!(!plain.is_empty());
    assert_eq!(ranges(&marked), ranges(&plain));
    let formatted = f.lsp.format(&file, "\u{feff}x=1\n", deadline()).unwrap();
    assert_eq!(formatted.as_deref(), Some("\u{feff}x = 1\n"));
    stop_and_check_gone(&f);
}

/// A changed configuration file: ruff, told of it, asks for a pull (`workspace/diagnostic/refresh`)
/// rather than publishing its findings beside what its pulls answer. Before, each finding was
/// held twice from then on, and the published one stayed after the edit that fixed it.
#[test]
fn ruff_after_a_configuration_change_each_finding_once_and_gone_when_fixed() {
    require("ruff");
    let f = fixture(only("python", "ruff server"));
    let file: PathBuf = f.dir.path().join("a.py");
    let config = f.dir.path().join("pyproject.toml");
    std::fs::write(&config, "[tool.ruff]\n").unwrap();
    let deadline = || Instant::now() + Duration::from_secs(20);
    let text = "import os\nimport sys\n\nprint(sys.argv)\n";
    let f401 = |d: &[Diagnostic]| d.iter().filter(|d| d.code == Some("F401".into())).count();
    assert_eq!(f401(&f.lsp.diagnostics(&file, text, deadline())), 1);
    std::fs::write(&config, "[tool.ruff.lint]\nextend-select = ['E501']\n").unwrap();
    assert!(
        f.lsp.watched().matches(&config),
        "ruff watches its configuration"
    );
    f.lsp
        .files_changed(&[(config.clone(), FileChange::Changed)]);
    // What ruff sends for the change comes in its own time: asked until it has (a refresh is
    // answered at once; a publish was held), a second at most.
    let mut seen = Vec::new();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(100));
        seen = f.lsp.diagnostics(&file, text, deadline());
        assert_eq!(f401(&seen), 1, "{seen:#?}");
    }
    assert_eq!(seen.len(), 1, "{seen:#?}");
    let fixed = f
        .lsp
        .diagnostics(&file, "import sys\n\nprint(sys.argv)\n", deadline());
    assert!(fixed.is_empty(), "{fixed:#?}");
    let log = String::from_utf8_lossy(&f.log.lock().unwrap()).into_owned();
    stop_and_check_gone(&f);
    assert!(!log.contains("panicked"), "{log}");
}

/// The built-in Python set: pyright for types and ruff for lint and formatting, run together. One
/// answer holds a type error from pyright and an unused import from ruff (two sources), `on_change`
/// is told both, and formatting goes to ruff (pyright does not format).
#[test]
fn pyright_and_ruff_together_one_answer_two_sources_and_ruff_formats() {
    require("pyright-langserver");
    require("ruff");
    let mut servers = ServerTable::empty();
    for lang in ServerTable::builtin().languages() {
        if lang.id == "python" {
            servers.push(lang.clone());
        }
    }
    assert_eq!(
        servers.resolve("python"),
        [
            vec!["pyright-langserver".to_string(), "--stdio".into()],
            vec!["ruff".to_string(), "server".into()]
        ]
    );
    let f = fixture(servers);
    let file: PathBuf = f.dir.path().join("both.py");
    let deadline = || Instant::now() + Duration::from_secs(20);
    let text = "import os

count: int = \"two\"\n";
    let checked = f.lsp.check(&file, text, deadline());
    let sources = |d: &[Diagnostic]| {
        let mut s: Vec<String> = d.iter().filter_map(|d| d.source.clone()).collect();
        s.sort();
        s.dedup();
        s
    };
    assert!(
        checked
            .diagnostics
            .iter()
            .any(|d| d.source.as_deref() == Some("Pyright")
                && d.message.contains("is not assignable to declared type")),
        "{checked:#?}\nlog: {}",
        String::from_utf8_lossy(&f.log.lock().unwrap())
    );
    assert!(
        checked
            .diagnostics
            .iter()
            .any(|d| d.source.as_deref() == Some("Ruff") && d.code == Some("F401".into())),
        "{checked:#?}"
    );
    assert_eq!(sources(&checked.diagnostics), ["Pyright", "Ruff"]);
    assert!(checked.fresh && checked.down.is_empty(), "{checked:#?}");
    // The clients are told the merged list: the last change of the file holds both.
    let uri = claude_ide_bridge::file_uri(file.to_str().unwrap());
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        let last = f
            .changes
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|c| c.uri == uri)
            .map(|c| sources(&c.diagnostics));
        if last.as_deref() == Some(&["Pyright".to_string(), "Ruff".to_string()][..]) {
            break;
        }
        assert!(Instant::now() < give_up, "last change: {last:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let known = f.lsp.known();
    assert_eq!(known.len(), 1, "{known:#?}");
    assert_eq!(sources(&known[0].diagnostics), ["Pyright", "Ruff"]);
    // Formatted by ruff, the one of the set that formats.
    let formatted = f
        .lsp
        .format(&file, "import os\nx=[1,\n  2]\n", deadline())
        .unwrap();
    assert_eq!(formatted.as_deref(), Some("import os\n\nx = [1, 2]\n"));
    assert_eq!(pids(&f.lsp).len(), 2, "{:?}", f.lsp.status());
    stop_and_check_gone(&f);
}

/// Run as a child by `servers_exit_when_the_bridge_is_killed` (`--ignored`; a no-op otherwise): starts
/// pyright, clangd and the scripted server, prints their pids, and waits to be killed.
#[test]
#[ignore = "the child of servers_exit_when_the_bridge_is_killed"]
fn child_holding_servers() {
    let Some(dir) = std::env::var_os("LSP_TEST_CHILD_WORKSPACE") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let mut servers = only("python", "pyright-langserver --stdio");
    for lang in only("c", "clangd").languages() {
        servers.push(lang.clone());
    }
    servers.push(claude_ide_bridge_lsp::table::Language {
        id: "fake".into(),
        extensions: vec!["fake".into()],
        commands: vec![vec![
            "python3".into(),
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fake_lsp.py").into(),
            "good".into(),
        ]],
        also: Vec::new(),
    });
    let lsp = Lsp::new(
        LspConfig {
            servers,
            workspace_folders: vec![dir.clone()],
            ..LspConfig::default()
        },
        |_| {},
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    assert!(!lsp
        .diagnostics(&dir.join("a.py"), "x: int = ''\n", deadline)
        .is_empty());
    assert!(!lsp
        .diagnostics(&dir.join("a.c"), "int f(void) { return nope; }\n", deadline)
        .is_empty());
    assert!(!lsp
        .diagnostics(&dir.join("a.fake"), "error\n", deadline)
        .is_empty());
    let pids: Vec<String> = pids(&lsp).iter().map(u32::to_string).collect();
    println!("PIDS {}", pids.join(" "));
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn servers_exit_when_the_bridge_is_killed() {
    use std::io::BufRead;
    require("pyright-langserver");
    require("clangd");
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holding_servers",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LSP_TEST_CHILD_WORKSPACE", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut pids = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        // libtest may have written "test child_holding_servers ... " on the same line.
        if let Some((_, rest)) = line.split_once("PIDS ") {
            pids = rest.split(' ').map(|p| p.parse::<u32>().unwrap()).collect();
            break;
        }
    }
    assert_eq!(pids.len(), 3, "the child did not start its servers");
    let pids = running(&pids);
    // SIGKILL: the bridge gets no chance to stop them; their input closes and the pid they watch is gone.
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Instant::now();
    while pids.iter().any(|&p| procs::alive(p)) {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "still running after the bridge died: {:?}",
            pids.iter()
                .filter(|&&p| procs::alive(p))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("servers gone {:?} after the bridge was killed", t.elapsed());
}

/// The first answer of a cold typescript-language-server for a big file of a project holds what
/// the file has: its type error (tsserver's semantic pass) and its deprecation hint (the
/// suggestion pass). That server publishes without versions, each pass as it ends, and while its
/// project loads its first publish is an empty list (the syntactic pass), which passed for the
/// answer before (rxjs' `Observable.ts` answered `[]`). Asked again without a change, and for an
/// edit, the same: never a pass short.
#[test]
fn typescript_first_answer_is_its_semantic_and_suggestion_passes_not_its_first_publish() {
    require("typescript-language-server");
    first_answer_holds_every_pass("typescript-language-server --stdio", "typescript");
}

/// [`typescript_first_answer_is_its_semantic_and_suggestion_passes_not_its_first_publish`] with
/// vtsls (VS Code's TypeScript extension as a language server): it offers the same
/// `typescript.tsserverRequest` command, which takes the file as a path where
/// typescript-language-server takes its URI, answers `null` for any failure, and names its
/// diagnostics `ts`.
#[test]
fn vtsls_first_answer_is_its_semantic_and_suggestion_passes_not_its_first_publish() {
    require("vtsls");
    first_answer_holds_every_pass("vtsls --stdio", "ts");
}

/// The first answer of a cold TypeScript server (`command`, whose diagnostics say they are from
/// `source`) for a big file of a project, asked again, and after an edit.
fn first_answer_holds_every_pass(command: &str, source: &str) {
    let f = fixture(only("typescript", command));
    let dir = f.dir.path();
    std::fs::write(
        dir.join("tsconfig.json"),
        r#"{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["*.ts"]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("lib.ts"),
        "/** @deprecated use `fresh` */\nexport function stale(n: number): number { return n; }\nexport function fresh(n: number): number { return n; }\n",
    )
    .unwrap();
    // Long enough that the server waits its longest before it checks (800 ms for 16,000 lines)
    // and that the semantic pass takes a while after the syntactic one.
    let mut text = String::from("import { stale } from './lib';\n");
    for i in 0..4000 {
        text.push_str(&format!(
            "export function f{i}(x: {{ a: number }}): string {{\n  const y = x.a + {i};\n  return String(y);\n}}\n"
        ));
    }
    text.push_str("export const total: number = stale(1);\nexport const label: number = 'one';\n");
    let last = text.lines().count() as u32 - 1;
    let file = dir.join("main.ts");
    std::fs::write(&file, &text).unwrap();
    let has_all = |d: &[Diagnostic]| {
        d.iter().any(|d| {
            d.severity == "Error"
                && d.message
                    .contains("Type 'string' is not assignable to type 'number'.")
                && d.range.start.line == last
        }) && d.iter().any(|d| {
            d.severity == "Hint"
                && d.message.contains("'stale' is deprecated.")
                && d.code == Some(serde_json::json!(6385))
        })
    };
    // Another text handed over first (an accepted diff), its check started: the question's own
    // text then replaces it (that check is cancelled), and the answer is that text's.
    let fixed = text.replace("label: number = 'one'", "label: string = 'one'");
    let t0 = Instant::now();
    f.lsp.sync(&file, &fixed);
    let first = f
        .lsp
        .check(&file, &text, Instant::now() + Duration::from_secs(60));
    eprintln!("first answer after {:?}: {first:?}", t0.elapsed());
    assert!(
        first.fresh && has_all(&first.diagnostics),
        "first answer: {first:#?}\nlog: {}",
        String::from_utf8_lossy(&f.log.lock().unwrap())
    );
    let again = f
        .lsp
        .check(&file, &text, Instant::now() + Duration::from_secs(20));
    assert!(
        again.fresh && again.diagnostics == first.diagnostics,
        "{again:#?}"
    );
    // An edit: the error fixed, the hint still there, nothing else.
    let after = f
        .lsp
        .check(&file, &fixed, Instant::now() + Duration::from_secs(20));
    assert!(after.fresh, "{after:#?}");
    assert!(
        after.diagnostics.iter().all(|d| d.severity != "Error"),
        "{after:#?}"
    );
    assert!(after
        .diagnostics
        .iter()
        .any(|d| d.message.contains("'stale' is deprecated.")));
    assert!(
        first
            .diagnostics
            .iter()
            .all(|d| d.source.as_deref() == Some(source)),
        "{first:#?}"
    );
    // The log has no refusal of the check.
    let log = String::from_utf8_lossy(&f.log.lock().unwrap()).into_owned();
    assert!(!log.contains("typescript.tsserverRequest"), "{log}");
    stop_and_check_gone(&f);
}
