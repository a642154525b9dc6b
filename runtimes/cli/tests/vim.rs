//! The Vim plugin (examples/vim/claude-ide-bridge.vim) in the real Vim, headless: it starts the
//! bridge in --stdio mode, pushes a selection, shows an openDiff with :diffsplit and accepts it
//! with :ClaudeAccept.

mod common;

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

#[test]
fn vim_plugin_end_to_end() {
    if Command::new("vim").arg("--version").output().is_err() {
        eprintln!("SKIPPED: vim is not installed (apt-get install -y vim)");
        return;
    }
    let sb = Sandbox::new();
    let file = sb.ws.join("a.txt");
    fs::write(&file, "one\ntwo\n").unwrap();
    let plugin = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/vim/claude-ide-bridge.vim"
    );
    let port_file = sb.root().join("port");
    let done = sb.root().join("done");
    let driver = sb.root().join("driver.vim");
    fs::write(
        &driver,
        format!(
            r#"vim9script
g:claude_ide_bridge_cmd = '{bin}'
source {plugin}
execute 'ClaudeBridgeStart {ws}'
var n = 0
while g:claude_bridge_port == 0 && n < 100
  sleep 100m
  n += 1
endwhile
edit {file}
execute ':1,1ClaudeSelection'
sleep 200m
writefile([string(g:claude_bridge_port)], '{port_file}')
n = 0
while empty(g:claude_pending) && n < 150
  sleep 100m
  n += 1
endwhile
ClaudeAccept
sleep 300m
writefile(['done'], '{done}')
qa!
"#,
            bin = BIN,
            plugin = plugin,
            ws = sb.ws.display(),
            file = file.display(),
            port_file = port_file.display(),
            done = done.display(),
        ),
    )
    .unwrap();
    let env = sb.command();
    let mut vim = Command::new("vim")
        .args(["-Nu", "NONE", "-i", "NONE", "-es", "-S"])
        .arg(&driver)
        .envs(
            env.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .current_dir(&sb.ws)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(20);
    while !port_file.exists() {
        assert!(Instant::now() < give_up, "vim did not start the bridge");
        std::thread::sleep(Duration::from_millis(50));
    }
    let port: u16 = fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(port > 0);
    let lock = sb.lock_dir().join(format!("{port}.lock"));
    let lockv: Value = serde_json::from_str(&fs::read_to_string(&lock).unwrap()).unwrap();
    assert_eq!(lockv["ideName"], "Vim");
    let (_, c) = client::connect(port, lockv["authToken"].as_str());
    let mut c = c.unwrap();
    c.init();
    let sel = json_of(&call(&mut c, "getCurrentSelection", json!({})));
    assert_eq!(sel["success"], true, "{sel}");
    assert_eq!(sel["text"], "one");
    assert_eq!(sel["filePath"], json!(file.to_string_lossy()));
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&file, "one\nTWO\nthree\n", "vim tab"),
    );
    let r = c
        .recv_until(Duration::from_secs(20), |v| v["id"] == json!(id))
        .expect("vim answered");
    assert_eq!(texts(&r), ["FILE_SAVED", "one\nTWO\nthree\n"]);
    // claude writes FILE_SAVED contents itself; until it does, the file is as it was.
    assert_eq!(fs::read_to_string(&file).unwrap(), "one\ntwo\n");
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        if vim.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < give_up, "vim did not quit");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(done.exists());
    // Vim gone: the bridge's stdin closed, it stopped and removed its lock file.
    let give_up = Instant::now() + WAIT;
    while lock.exists() {
        assert!(Instant::now() < give_up, "lock file left behind");
        std::thread::sleep(Duration::from_millis(50));
    }
}
