//! What the fuzz target and the memory tests drive: [`server_output`] is the body of the `lsp`
//! fuzz target (`fuzz/`: bytes a language server might write, through the codec into one
//! server's state, with the client's invariants checked after every message); the others are the
//! memory tests' (`tests/parse_memory.rs`, `tests/sync_memory.rs`). Not part of the API.

use crate::codec::Decoder;
use crate::state::{LspLimits, State};

/// `[cfg, chunk, output...]`: `output` is what the server writes, fed in chunks of `chunk + 1` bytes.
/// `cfg` bits: 1 a small message limit (256 bytes), 2 the client answers for itself that `initialize`
/// succeeded with pulls, 8 (without 2) that it succeeded with `typescript.tsserverRequest` (else the
/// output's first answer to id 1 is the `initialize` answer), 4 a document is opened first (and, for
/// a server that checks on request, its check asked).
///
/// Checked: nothing panics; the decoder holds at most one header block, one body and one chunk; no body over
/// the limit is returned; every frame the client queues is a well-formed JSON-RPC object; every request the
/// server sends is answered exactly once; the diagnostics held stay within their bounds, counted exactly.
pub fn server_output(data: &[u8]) {
    let [cfg, chunk, output @ ..] = data else {
        return;
    };
    let limits = LspLimits {
        max_message_bytes: if cfg & 1 != 0 { 256 } else { 64 << 10 },
        max_diagnostics_per_file: 3,
        max_total_diagnostics: 8,
        max_files: 3,
        max_open_files: 2,
        max_outbox_bytes: 1 << 20,
        ..LspLimits::default()
    };
    let mut state = State::new(limits.clone(), vec![]);
    state.begin(1, None);
    if cfg & 2 != 0 {
        let init = br#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"textDocumentSync":1,"diagnosticProvider":{"interFileDependencies":false,"workspaceDiagnostics":false}}}}"#;
        state.handle(init).expect("a well-formed initialize answer");
    } else if cfg & 8 != 0 {
        let init = br#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"textDocumentSync":1,"executeCommandProvider":{"commands":["typescript.tsserverRequest"]}}}}"#;
        state.handle(init).expect("a well-formed initialize answer");
    }
    if cfg & 4 != 0 {
        state.sync("/w/a.py", "python", "x = 1\n");
        // A server that checks on request is asked (ids 2, 3, 4): the output may answer.
        if let Some(version) = state.version("/w/a.py") {
            state.ask_check("/w/a.py", version);
        }
    }
    let _ = state.take_outbox();
    let mut decoder = Decoder::new(limits.max_message_bytes);
    for piece in output.chunks(usize::from(*chunk) + 1) {
        decoder.push(piece);
        assert!(
            decoder.buffered()
                <= Decoder::MAX_HEADER_BYTES + limits.max_message_bytes + piece.len()
        );
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => return, // the server is stopped: nothing more is read
            };
            assert!(frame.len() <= limits.max_message_bytes);
            let request = serde_json::from_slice::<serde_json::Value>(&frame)
                .ok()
                .filter(|m| m.get("method").is_some())
                .and_then(|m| m.get("id").cloned())
                .filter(|id| !id.is_null());
            let running = state.is_running();
            if state.handle(&frame).is_err() {
                return;
            }
            let sent = queued(&mut state);
            if let Some(id) = request {
                let answers = sent
                    .iter()
                    .filter(|m| m.get("id") == Some(&id) && m.get("method").is_none());
                assert_eq!(answers.count(), 1, "one answer to request {id}");
            }
            if running {
                // Once running, only answers (and, after initialize, the opening of early texts) are sent.
                assert!(sent.iter().all(|m| m.get("method").is_none()));
            }
            state.check_bounds();
        }
    }
}

/// One running server's state (pulls offered, `/w/a.py` open) handling `frames`, the bodies of
/// what the server writes, with nothing else around it (for tests that measure what reading them
/// costs). Returns how many it took without stopping the server.
pub fn handle_bodies(frames: &[&[u8]]) -> usize {
    let mut state = State::new(LspLimits::default(), vec![]);
    state.begin(1, None);
    let init = br#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"textDocumentSync":1}}}"#;
    state.handle(init).expect("a well-formed initialize answer");
    state.sync("/w/a.py", "python", "x = 1\n");
    frames
        .iter()
        .take_while(|frame| state.handle(frame).is_ok())
        .count()
}

/// One running server's state (full texts in `didChange`, and in `didSave` too) syncing each of
/// `texts` to one file in turn, with nothing written out (for tests that measure what a sync
/// holds). Whether the server is still taken for running after.
pub fn sync_texts(texts: &[&str]) -> bool {
    let mut state = State::new(LspLimits::default(), vec![]);
    state.begin(1, None);
    let init = br#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"textDocumentSync":{"openClose":true,"change":1,"save":{"includeText":true}}}}}"#;
    state.handle(init).expect("a well-formed initialize answer");
    for text in texts {
        state.sync("/w/a.py", "python", text);
    }
    state.is_running()
}

/// Takes the queued frames, checking that each is one Content-Length frame of a JSON-RPC 2.0 object.
fn queued(state: &mut State) -> Vec<serde_json::Value> {
    state
        .take_outbox()
        .into_iter()
        .map(|frame| {
            let mut d = Decoder::new(usize::MAX);
            d.push(&frame.start(usize::MAX));
            let body = d.next_frame().expect("our framing").expect("a whole frame");
            assert_eq!(d.buffered(), 0);
            let msg: serde_json::Value = serde_json::from_slice(&body).expect("our JSON");
            assert_eq!(msg["jsonrpc"], "2.0");
            msg
        })
        .collect()
}
