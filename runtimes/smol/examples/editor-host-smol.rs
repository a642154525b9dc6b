//! A minimal editor host: serves a folder (argument or current directory), prints the port and
//! lock file, pushes a `selection_changed` every few seconds, accepts every `openDiff` as
//! proposed, and answers other tools truthfully or with a tool error. It needs only its runtime's
//! crate, which re-exports every type a host uses.
//!
//! `cargo run -p claude-ide-bridge-smol --example editor-host-smol -- /path/to/project`

use std::path::PathBuf;
use std::time::Duration;

use claude_ide_bridge_smol::{
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
    smol::block_on(async {
        let folder = std::env::args()
            .nth(1)
            .map(PathBuf::from)
            .unwrap_or(std::env::current_dir()?);
        let folder = std::path::absolute(folder)?;
        let server =
            IdeServer::start(Options::new(vec![folder.clone()], "editor-host (smol)")).await?;
        let folder = posix_folders(&[folder])?.remove(0);
        println!("port {}", server.port());
        println!("lock file {:?}", server.lock_path());
        let handle = server.handle();
        let pusher = handle.clone();
        let path = format!("{folder}/README.md");
        smol::spawn(async move {
            loop {
                let n = pusher.notify(
                    Target::All,
                    &Notification::SelectionChanged(SelectionChanged {
                        text: String::new(),
                        file_url: file_uri(&path),
                        file_path: path.clone(),
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
                async_io::Timer::after(Duration::from_secs(3)).await;
            }
        })
        .detach();
        while let Some(event) = server.next_event().await {
            match event {
                Event::ToolCall { call, tool } => {
                    let _ = handle.respond(call, answer(&tool, &folder));
                }
                other => println!("{other:?}"),
            }
        }
        Ok(())
    })
}
