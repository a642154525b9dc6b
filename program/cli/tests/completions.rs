//! `completions` and `man` through the built program: the bash and fish scripts load in the real
//! shells and complete what `--help` lists, the zsh script loads and registers itself in a real
//! zsh, and the man page renders in groff without a warning and documents every command and
//! long flag that `--help` shows. The expected commands and flags are read from the program's
//! own `--help` output, never from a list kept here.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_claude-ide-bridge");

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(args: &[&str]) -> String {
    String::from_utf8(run(Command::new(BIN).args(args)).stdout).unwrap()
}

/// The subcommands listed under `Commands:` in `claude-ide-bridge --help`.
fn commands_in_help() -> Vec<String> {
    let help = stdout(&["--help"]);
    let list = help
        .split("\nCommands:\n")
        .nth(1)
        .expect("a Commands: section");
    let names: Vec<String> = list
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    assert!(names.iter().any(|n| n == "serve"), "{help}");
    names
}

/// The long flags at the start of the option lines of `claude-ide-bridge help [COMMAND]` (the
/// text `--help` prints, also for `help`, which has no `--help` of its own).
fn flags_in_help(command: &[&str]) -> BTreeSet<String> {
    let mut args = vec!["help"];
    args.extend(command);
    let help = stdout(&args);
    let mut flags = BTreeSet::new();
    for line in help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
    {
        for word in line.split([' ', ',', '=']) {
            if let Some(name) = word.strip_prefix("--").filter(|n| !n.is_empty()) {
                flags.insert(format!("--{name}"));
            }
        }
    }
    flags
}

fn bash(script: &str) -> Output {
    Command::new("bash")
        .args(["--norc", "--noprofile", "-c", script])
        .env("BIN", BIN)
        .output()
        .expect("bash is needed for this test")
}

#[test]
fn bash_loads_the_script_and_registers_the_completion() {
    let out = bash(r#"source <("$BIN" completions bash) && complete -p claude-ide-bridge"#);
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{}\n{so}\n{se}", out.status);
    assert_eq!(se, "", "loading the script wrote errors");
    assert!(
        so.starts_with("complete ") && so.trim_end().ends_with(" claude-ide-bridge"),
        "{so}"
    );
    assert!(so.contains(" -F _claude__ide__bridge "), "{so}");
}

/// Completes `words` (the last one being the word under the cursor) the way bash does on Tab,
/// through the function the script registered, and returns the candidates.
fn complete_in_bash(words: &[&str]) -> BTreeSet<String> {
    complete_in_bash_with(words, "")
}

/// [`complete_in_bash`] after the shell lines `setup` (a `PATH`, a `cd`).
fn complete_in_bash_with(words: &[&str], setup: &str) -> BTreeSet<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        r#"{setup}
source <("$BIN" completions bash) || exit 1
fn=$(complete -p claude-ide-bridge | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
COMP_WORDS=({words})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
COMPREPLY=()
"$fn" claude-ide-bridge "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        words = quoted.join(" ")
    );
    let out = bash(&script);
    assert!(
        out.status.success(),
        "{words:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{words:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_the_commands_and_each_commands_flags() {
    let commands = commands_in_help();
    assert!(flags_in_help(&["serve"]).contains("--on-diff"));
    let offered = complete_in_bash(&["claude-ide-bridge", ""]);
    for c in &commands {
        assert!(offered.contains(c), "{c} not offered: {offered:?}");
    }
    for c in &commands {
        let flags = flags_in_help(&[c]);
        let offered = complete_in_bash(&["claude-ide-bridge", c, "--"]);
        assert_eq!(offered, flags, "{c} --<Tab>");
    }
    // Values: the diff policies, and the shells this command writes scripts for.
    let policies = complete_in_bash(&["claude-ide-bridge", "serve", "--on-diff", ""]);
    assert_eq!(
        policies,
        ["accept", "ask", "defer", "reject"]
            .map(String::from)
            .into()
    );
    let shells = complete_in_bash(&["claude-ide-bridge", "completions", "b"]);
    assert_eq!(shells, ["bash".to_owned()].into());
}

#[test]
fn bash_completes_a_command_after_run_dashes() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let cwd = dir.path().join("cwd");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    let probe = bin.join("zz-bridge-probe");
    std::fs::write(&probe, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(cwd.join("zz-file"), "").unwrap();
    let setup = format!(
        "PATH='{}':\"$PATH\"; cd '{}' || exit 1",
        bin.display(),
        cwd.display()
    );
    let complete = |words: &[&str]| complete_in_bash_with(words, &setup);
    // The first word after `--` is a command: found on PATH, not among the folder's files.
    let first = complete(&["claude-ide-bridge", "run", "--", "zz"]);
    assert!(first.contains("zz-bridge-probe"), "{first:?}");
    assert!(!first.contains("zz-file"), "{first:?}");
    let after_flags = complete(&[
        "claude-ide-bridge",
        "run",
        "--port",
        "1",
        "--",
        "zz-bridge-p",
    ]);
    assert_eq!(after_flags, ["zz-bridge-probe".to_owned()].into());
    // Its arguments are its own: files, never the bridge's flags.
    let args = complete(&["claude-ide-bridge", "run", "--", "zz-bridge-probe", "zz"]);
    assert_eq!(args, ["zz-file".to_owned()].into());
    let flags = complete(&["claude-ide-bridge", "run", "--", "zz-bridge-probe", "--w"]);
    assert!(flags.is_empty(), "{flags:?}");
    // Before `--`, the bridge's own flags as before.
    let own = complete(&["claude-ide-bridge", "run", "--work"]);
    assert_eq!(own, ["--workspace".to_owned()].into());
}

/// Runs `script` in a fish without configuration files, with the program as `$BIN`.
fn fish(script: &str) -> Output {
    Command::new("fish")
        .args(["--no-config", "-c", script])
        .env("BIN", BIN)
        .output()
        .expect("fish is needed for this test (scripts/test-all.sh installs it)")
}

/// fish's own candidates for the command line `line` (`complete -C`), without descriptions.
fn complete_in_fish(line: &str) -> BTreeSet<String> {
    let out = fish(&format!(
        "\"$BIN\" completions fish | source; and complete -C '{line}'"
    ));
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{line}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split('\t').next())
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn fish_parses_the_script_and_completes_the_commands_and_each_commands_flags() {
    let check = fish(r#""$BIN" completions fish | fish --no-config --no-execute"#);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&check.stderr),
        "",
        "fish --no-execute"
    );

    let commands = commands_in_help();
    let offered = complete_in_fish("claude-ide-bridge ");
    for c in &commands {
        assert!(offered.contains(c), "{c} not offered: {offered:?}");
    }
    for c in &commands {
        let offered = complete_in_fish(&format!("claude-ide-bridge {c} --"));
        assert_eq!(offered, flags_in_help(&[c]), "{c} --<Tab>");
    }
    let policies = complete_in_fish("claude-ide-bridge run --on-diff ");
    assert_eq!(
        policies,
        ["accept", "ask", "defer", "reject"]
            .map(String::from)
            .into()
    );
}

#[test]
fn zsh_parses_the_script_and_registers_the_completion() {
    let script = stdout(&["completions", "zsh"]);
    let mut check = Command::new("zsh")
        .arg("-n")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zsh is needed for this test (scripts/test-all.sh installs it)");
    check
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let check = check.wait_with_output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    // compinit with a throwaway HOME (-D: no dump file); sourcing the script outside a
    // completion registers its function for the command.
    let home = std::env::temp_dir().join(format!("claude-ide-bridge-zsh-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new("zsh")
        .args(["-f", "-c"])
        .arg(r#"autoload -U compinit && compinit -u -D && source <("$BIN" completions zsh) && print -r -- "$_comps[claude-ide-bridge]" && whence -w _claude-ide-bridge_commands"#)
        .env("BIN", BIN)
        .env("HOME", &home)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&home).ok();
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{so}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(
        so,
        "_claude-ide-bridge\n_claude-ide-bridge_commands: function\n"
    );
}

fn groff(args: &[&str], page: &[u8]) -> Output {
    let mut child = Command::new("groff")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("groff is needed for this test (scripts/test-all.sh installs it)");
    child.stdin.take().unwrap().write_all(page).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn man_page_renders_without_warnings_and_documents_every_command_and_flag() {
    let page = run(Command::new(BIN).arg("man")).stdout;
    assert!(
        page.starts_with(b".ie") || page.starts_with(b".TH"),
        "not roff"
    );

    // Every groff warning enabled (-ww), output discarded (-z): stderr must stay empty.
    let check = groff(&["-man", "-Tutf8", "-ww", "-z"], &page);
    assert!(check.status.success());
    assert_eq!(String::from_utf8_lossy(&check.stderr), "", "groff warnings");

    // As plain text, lines long enough that no flag is broken across lines.
    let text = groff(&["-man", "-Tascii", "-rLL=300n", "-P-cbou"], &page);
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    let text = String::from_utf8(text.stdout).unwrap();
    let sections: Vec<(&str, &str)> = text
        .split("\n   claude-ide-bridge ")
        .skip(1)
        .map(|s| s.split_once('\n').unwrap_or((s, "")))
        .collect();
    let top = text.split("\n   claude-ide-bridge ").next().unwrap();
    for flag in flags_in_help(&[]) {
        assert!(
            top.contains(&flag),
            "the program's {flag} is not documented:\n{top}"
        );
    }
    for c in commands_in_help() {
        let (_, body) = sections
            .iter()
            .find(|(name, _)| name.trim() == c)
            .unwrap_or_else(|| panic!("no section for {c} in\n{text}"));
        for flag in flags_in_help(&[&c]) {
            let documented = body.lines().any(|l| l.split([' ', ',']).any(|w| w == flag));
            assert!(documented, "{c} {flag} is not documented:\n{body}");
        }
    }
}
