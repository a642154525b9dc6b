//! What a server sends costs about its own size to read, not many times it: the members the client
//! does not use (`data`, `relatedInformation`: any JSON) are passed over without being built.
//! `lsp_types` built them as values: a 60 KB publish whose diagnostic carries two 30 KB `[0,0,...]`
//! took 848 KB (14 times its bytes; 62 KB now), and so for each message up to the 8 MiB limit.
//!
//! Its own test binary: the counting allocator counts every allocation of the process.

use claude_ide_bridge_testsupport::counting_alloc;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

#[test]
fn unused_members_of_a_publish_cost_no_memory() {
    let zeros = vec!["0"; 15_000].join(",");
    let body = format!(
        r#"{{"jsonrpc":"2.0","method":"textDocument/publishDiagnostics","params":{{"uri":"file:///w/a.py","version":1,"diagnostics":[{{"range":{{"start":{{"line":0,"character":0}},"end":{{"line":0,"character":1}}}},"message":"m","data":[{zeros}],"relatedInformation":[{zeros}]}}]}}}}"#
    );
    let (taken, peak) = counting_alloc::peak_during(|| {
        claude_ide_bridge_lsp::fuzzing::handle_bodies(&[body.as_bytes()])
    });
    assert_eq!(taken, 1);
    eprintln!(
        "peak memory reading a {} byte publish: {peak} bytes",
        body.len()
    );
    // One copy of the params (kept raw until read), the state's small tables and the one
    // diagnostic kept: not 16 times the message.
    assert!(
        peak < 2 * body.len(),
        "{peak} bytes for a {}-byte message",
        body.len()
    );
}
