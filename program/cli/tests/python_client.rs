//! `serve` driven by an independent WebSocket implementation: Python's `websockets`.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::fs;
use std::process::Command;

use common::*;
use serde_json::Value;

#[test]
fn python_websockets_client() {
    let ok = Command::new("python3")
        .args(["-c", "import websockets"])
        .output()
        .map(|o| o.status.success());
    match ok {
        Err(_) => {
            claude_ide_bridge_testsupport::skip::tool_missing("python3 is not installed");
            return;
        }
        Ok(false) => panic!("python3 has no `websockets`: pip install websockets"),
        Ok(true) => {}
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/ws_client.py");
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        let file = sb.ws.join("p.txt");
        fs::write(&file, "old\n").unwrap();
        let mut s = Served::start(&sb, &["--runtime", rt, "--on-diff", "accept"]);
        let o = Command::new("python3")
            .arg(script)
            .arg(s.port.to_string())
            .arg(s.token())
            .arg(&file)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let lines: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["initialize"], "2025-06-18");
        assert_eq!(
            lines[1]["folders"]["folders"][0]["path"],
            sb.ws.to_string_lossy().as_ref()
        );
        assert_eq!(lines[2]["openDiff"]["content"][0]["text"], "FILE_SAVED");
        assert_eq!(lines[2]["openDiff"]["content"][1]["text"], "from python\n");
        assert_eq!(s.stop(), 0);
    }
}
