//! Asks the language servers for the diagnostics of files, as the bridge does, and prints them with how long
//! each answer took.
//!
//! Usage: `cargo run -p claude-ide-bridge-lsp --example diagnose -- [--lsp LANG=COMMAND]... [--trace]
//! [--workspace DIR] FILE...` (the workspace is the current directory unless given; files are relative to it;
//! the servers' log goes to stderr).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claude_ide_bridge_lsp::{parse_override, Lsp, LspConfig, LspLog, ServerTable};

fn main() {
    let mut servers = ServerTable::builtin();
    let mut files = Vec::new();
    let mut trace = false;
    let mut workspace = std::env::current_dir().expect("a current directory");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--lsp" => match args.next().map(|spec| parse_override(&spec)) {
                Some(Ok(ov)) => servers.set(ov),
                Some(Err(e)) => return eprintln!("{e}"),
                None => return eprintln!("--lsp needs LANG=COMMAND"),
            },
            "--trace" => trace = true,
            "--workspace" => match args.next() {
                Some(dir) => workspace = PathBuf::from(dir),
                None => return eprintln!("--workspace needs a directory"),
            },
            _ => files.push(PathBuf::from(arg)),
        }
    }
    let cwd = workspace;
    let config = LspConfig {
        servers,
        workspace_folders: vec![cwd.clone()],
        log: LspLog::Writer(Arc::new(Mutex::new(std::io::stderr()))),
        trace,
        ..LspConfig::default()
    };
    let lsp = Lsp::new(config, |_| {});
    for file in files {
        let path = cwd.join(&file);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("{}: {e}", file.display());
                continue;
            }
        };
        let t = Instant::now();
        let diagnostics = lsp.diagnostics(&path, &text, lsp.deadline());
        println!(
            "{}: {} diagnostics in {:?}",
            file.display(),
            diagnostics.len(),
            t.elapsed()
        );
        for d in diagnostics {
            let code = d.code.map(|c| format!(" [{c}]")).unwrap_or_default();
            println!(
                "  {}:{}: {}: {}{code}",
                d.range.start.line + 1,
                d.range.start.character + 1,
                d.severity,
                d.message.lines().next().unwrap_or("")
            );
        }
    }
    for status in lsp.status() {
        let command = status
            .command
            .map_or_else(|| "(none installed)".into(), |c| c.join(" "));
        println!(
            "{}: {command}: {}",
            status.languages.join(", "),
            status.state
        );
    }
    lsp.shutdown(Duration::from_secs(2));
}
