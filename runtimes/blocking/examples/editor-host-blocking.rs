//! A minimal editor host: serves a folder (argument or current directory), prints the port and
//! lock file, pushes a `selection_changed` every few seconds, accepts every `openDiff` as
//! proposed, and answers other tools truthfully or with a tool error. It needs only its runtime's
//! crate, which re-exports every type a host uses.
//!
//! `cargo run -p claude-ide-bridge-blocking --example editor-host-blocking -- /path/to/project`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use claude_ide_bridge_blocking::{
    file_uri, posix_folders, Event, IdeServer, Notification, Options, Position, Selection,
    SelectionChanged, Target, ToolCall, ToolResult, WorkspaceFolder, WorkspaceFolders,
};

fn answer(tool: &ToolCall, folder: &str) -> ToolResult {
    match tool {
        ToolCall::OpenDiff(d) => {
            println!(
                "openDiff {} ({} bytes proposed): accepted",
                d.new_file_path,
                d.new_file_contents.len()
            );
            ToolResult::file_saved(d.new_file_contents.clone())
        }
        ToolCall::GetWorkspaceFolders => ToolResult::json(&WorkspaceFolders {
            success: true,
            folders: vec![WorkspaceFolder {
                name: folder.rsplit('/').next().unwrap_or(folder).to_string(),
                uri: file_uri(folder),
                path: folder.to_string(),
            }],
            root_path: folder.to_string(),
        }),
        // (`closeAllDiffTabs` and `close_tab` the engine answers itself: they never come here.)
        other => ToolResult::error(format!(
            "{} is not supported by this example host",
            other.name().as_str()
        )),
    }
}

fn main() -> std::io::Result<()> {
    let folder = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or(std::env::current_dir()?);
    let folder = std::path::absolute(folder)?;
    let server = IdeServer::start(Options::new(vec![folder.clone()], "editor-host (blocking)"))?;
    let folder = posix_folders(&[folder])?.remove(0);
    println!("port {}", server.port());
    println!("lock file {:?}", server.lock_path());
    let handle = server.handle();
    let mut next_push = Instant::now();
    loop {
        if Instant::now() >= next_push {
            next_push = Instant::now() + Duration::from_secs(3);
            let path = format!("{folder}/README.md");
            let n = handle.notify(
                Target::All,
                &Notification::SelectionChanged(SelectionChanged {
                    text: String::new(),
                    file_url: file_uri(&path),
                    file_path: path,
                    selection: Selection::new(
                        Position {
                            line: 0,
                            character: 0,
                        },
                        Position {
                            line: 0,
                            character: 0,
                        },
                    ),
                }),
            );
            if n > 0 {
                println!("selection_changed sent to {n} client(s)");
            }
        }
        match server.next_event_timeout(Duration::from_millis(500)) {
            Some(Event::ToolCall { call, tool }) => {
                let _ = handle.respond(call, answer(&tool, &folder));
            }
            Some(other) => println!("{other:?}"),
            // No event in time, or none any more: the server stopped.
            None if server.is_stopped() => break,
            None => {}
        }
    }
    server.stop();
    Ok(())
}
