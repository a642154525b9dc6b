//! The compatibility methods (`readFile`, `writeFile`, `listFiles`, ...: plain JSON-RPC methods
//! some clients call besides MCP). Those that touch files run as [`jobs`](super::jobs) through
//! the files crate (`claude-ide-bridge-files`: confined to the workspace, regular files only,
//! bounded); those that report what the editor told the host are answered at once.

use claude_ide_bridge::RpcError;
use claude_ide_bridge::{CallId, CompatRequest};
use claude_ide_bridge_files::{Error, Workspace};
use serde_json::{json, Value};

use std::sync::Arc;
use std::time::Duration;

use super::jobs::{Room, Taken, FREE_READ};
use super::Host;
use crate::ui;

/// A refusal of the files crate as a JSON-RPC error: what the client may not have or that
/// cannot be served is invalid params (-32602), a failing file system is an internal error.
pub(super) fn rpc_error(e: Error) -> RpcError {
    if e.is_refusal() {
        RpcError::invalid_params(e.to_string())
    } else {
        RpcError::internal(e.to_string())
    }
}

impl Host {
    pub(super) fn on_compat(&mut self, call: CallId, request: CompatRequest) {
        let ws = self.ws.clone();
        let answer = match request {
            CompatRequest::FilesRead { path } | CompatRequest::ReadFile { path } => {
                let (room, handle) = (self.jobs.room(), self.handle.clone());
                let still_wanted = move || handle.is_pending(call);
                return (self.jobs)
                    .compat_holding(call, move || read_file(&ws, &path, &room, still_wanted));
            }
            CompatRequest::WriteFile { path, content } => {
                let lsp = self.lsp.clone();
                return self.jobs.compat(call, move || {
                    let (written, answer) = write_file(&ws, &path, &content)?;
                    // Written through the bridge: its language server gets the new text now.
                    if let Some(servers) = lsp {
                        servers.changed(std::path::Path::new(&written), &content, false);
                    }
                    Ok(answer)
                });
            }
            CompatRequest::ListFiles { pattern } => {
                return self.jobs.compat(call, move || {
                    let listing = ws.list(pattern.as_deref()).map_err(rpc_error)?;
                    Ok(json!({"files": listing.files, "truncated": listing.truncated}))
                });
            }
            CompatRequest::GetWorkspaceInfo => {
                let ide_name = self.ide_name.clone();
                return self
                    .jobs
                    .compat(call, move || Ok(workspace_info(&ws, &ide_name)));
            }
            CompatRequest::GetOpenFiles => json!({ "files": self.tabs.paths() }),
            CompatRequest::GetCurrentFile => json!({
                "filePath": self.selection.as_ref().map(|s| s.file_path.clone())
            }),
            CompatRequest::WorkspaceSelection => match &self.selection {
                Some(s) => json!({
                    "success": true, "text": s.text, "filePath": s.file_path,
                    "fileUrl": s.file_url, "selection": s.selection,
                }),
                None => json!({"success": false, "message": "No selection"}),
            },
            // A method of a newer engine this host does not answer: refused as unknown.
            other => {
                let refusal = RpcError::new(
                    RpcError::METHOD_NOT_FOUND,
                    format!("this host does not answer {other:?}"),
                );
                if let Err(e) = self.handle.respond_compat(call, Err(refusal)) {
                    ui::say(&super::not_given(call, &e));
                }
                return;
            }
        };
        if let Err(e) = self.handle.respond_compat(call, Ok(answer)) {
            ui::say(&super::not_given(call, &e));
        }
    }
}

/// `readFile`: the file is opened, room taken for its bytes ([`Room`]: reads past it wait
/// their turn; one of at most [`FREE_READ`] bytes takes none), then read; the room is held
/// until the answer is queued. A read that has to wait does not hold its file open meanwhile
/// (on Windows an open file can keep a save by rename from replacing it): it opens it again
/// once it has room, and gives up when nobody waits for its answer any more (`still_wanted`:
/// the call cancelled, its client gone, its deadline past).
fn read_file(
    ws: &Workspace,
    path: &str,
    room: &Arc<Room>,
    still_wanted: impl Fn() -> bool,
) -> (Result<Value, RpcError>, Option<Taken>) {
    match read_within(ws, path, room, still_wanted) {
        Ok((answer, taken)) => (Ok(answer), taken),
        Err(e) => (Err(e), None),
    }
}

/// [`read_file`]'s steps: its answer, and the room it holds (none for a small file).
fn read_within(
    ws: &Workspace,
    path: &str,
    room: &Arc<Room>,
    still_wanted: impl Fn() -> bool,
) -> Result<(Value, Option<Taken>), RpcError> {
    let mut opened = ws.open(path).map_err(rpc_error)?;
    let size = opened.size();
    let mut taken = None;
    if size > FREE_READ {
        taken = room.take(size, Duration::ZERO);
        if taken.is_none() {
            drop(opened);
            let refusal = || {
                let why = format!(
                    "{} of files are being read for clients (at most {} at once); try again",
                    mib(room.held()),
                    mib(room.max())
                );
                RpcError::new(RpcError::TOO_MANY_CALLS, why)
            };
            taken = Some(room.take(size, ROOM_WAIT).ok_or_else(refusal)?);
            if !still_wanted() {
                return Err(RpcError::internal("the call was no longer waiting"));
            }
            opened = ws.open(path).map_err(rpc_error)?;
        }
    }
    let text = opened.read_text().map_err(rpc_error)?;
    if let Some(taken) = &mut taken {
        // A file that grew since its size was looked at holds more.
        taken.grow_to(text.content.len() as u64);
    }
    let answer = json!({"path": text.path, "content": text.content});
    Ok((answer, taken))
}

/// `n` bytes in MiB, to one decimal place.
fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
}

/// How long a read waits for room before it is refused: shorter than the job's deadline, so
/// that the refusal, not the time-out, is the answer when reads hold the room that long (a
/// file system that stalls under them).
const ROOM_WAIT: Duration = Duration::from_secs(15);

fn write_file(ws: &Workspace, path: &str, content: &str) -> Result<(String, Value), RpcError> {
    let written = ws.write(path, content.as_bytes()).map_err(rpc_error)?;
    ui::say(&format!("file written (writeFile): {written}"));
    let answer = json!({"success": true, "path": written});
    Ok((written, answer))
}

/// `getWorkspaceInfo`: the shape other IDE integrations answer (`name` of the workspace, `path`,
/// `fileCount`, `type`: see the files crate's `Workspace::info`), and the folders.
fn workspace_info(ws: &Workspace, ide_name: &str) -> Value {
    let info = ws.info();
    json!({
        "name": info.name,
        "path": info.path,
        "fileCount": info.file_count,
        "fileCountTruncated": info.file_count_truncated,
        "type": info.kind,
        "folders": ws.folders(),
        "rootPath": ws.folders().first(),
        "ideName": ide_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use claude_ide_bridge_files::Limits;

    /// A small read does not wait in line for room behind large ones (another client's small
    /// read waited up to 1.4 s behind eight clients' 9 MiB reads), and a large one gives up
    /// when its call is no longer waited for once it has room.
    #[test]
    fn a_small_read_takes_no_room_and_a_large_one_gone_meanwhile_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small.txt"), "hi\n").unwrap();
        let big = "x".repeat(FREE_READ as usize + 1);
        std::fs::write(dir.path().join("big.txt"), &big).unwrap();
        let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
        let room = Room::new(FREE_READ * 4);
        let full = room.take(FREE_READ * 4, Duration::ZERO).unwrap();
        let (answer, taken) = read_file(&ws, "small.txt", &room, || true);
        assert_eq!(answer.unwrap()["content"], "hi\n");
        assert!(taken.is_none());
        // The large one waits; the room is given back meanwhile, and by then nobody waits.
        let giver = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(full);
        });
        let (answer, taken) = read_file(&ws, "big.txt", &room, || false);
        giver.join().unwrap();
        assert!(answer.is_err() && taken.is_none(), "{answer:?}");
        assert_eq!(room.held(), 0);
        let (answer, taken) = read_file(&ws, "big.txt", &room, || true);
        assert_eq!(answer.unwrap()["content"], big.as_str());
        assert_eq!(room.held(), big.len() as u64);
        drop(taken);
        assert_eq!(room.held(), 0);
    }
}
