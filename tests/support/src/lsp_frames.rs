//! Language Server Protocol framing (`Content-Length` headers, then a JSON body), for the test
//! stand-in servers and the benchmarks' minimal client. Test code: a frame it cannot read ends
//! the input, as for a peer that went away.
//!
//! ```
//! use claude_ide_bridge_testsupport::lsp_frames;
//! let mut wire = Vec::new();
//! lsp_frames::write(&mut wire, &serde_json::json!({"id": 1, "result": null})).unwrap();
//! let back = lsp_frames::read(&mut &wire[..]).unwrap();
//! assert_eq!(back, serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": null}));
//! ```

use std::io::{BufRead, Write};

use serde_json::{json, Value};

/// One message, or `None` at the end of the input, or on a frame it cannot read.
pub fn read(input: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if input.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
    }
    let mut body = vec![0; length?];
    input.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

/// Writes `msg` as one frame, with `"jsonrpc": "2.0"` set, and flushes.
pub fn write(out: &mut impl Write, msg: &Value) -> std::io::Result<()> {
    let mut msg = msg.clone();
    msg["jsonrpc"] = json!("2.0");
    let body = msg.to_string();
    write!(out, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    out.flush()
}
