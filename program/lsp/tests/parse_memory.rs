//! What a server sends costs about what the client keeps of it to read, not many times the
//! message. The members the client does not use (`data`, `relatedInformation`: any JSON) are
//! passed over without being built: `lsp_types` built them as values, so a 60 KB publish whose
//! diagnostic carries two 30 KB `[0,0,...]` took 848 KB (14 times its bytes; 62 KB now). And of
//! a publish of thousands of diagnostics only those kept are built (the most severe 200 a file):
//! 3,000 warnings from clangd, 525 KB, took 1.2 MB to read (the params copied out of the message
//! and every diagnostic built, then all but 200 dropped); about 70 KB now.
//!
//! Its own test binary: the counting allocator counts every allocation of the process, so the
//! measures are taken one after another in one test.

use claude_ide_bridge_testsupport::counting_alloc;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

#[test]
fn reading_a_publish_costs_about_what_is_kept() {
    unused_members_of_a_publish_cost_no_memory();
    a_publish_of_thousands_costs_the_diagnostics_kept();
}

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
    // The state's small tables and the one diagnostic kept: not 16 times the message (848 KB
    // with lsp-types), nor the params copied out of it (62 KB before they were borrowed).
    assert!(
        peak < body.len() / 4,
        "{peak} bytes for a {}-byte message",
        body.len()
    );
}

fn a_publish_of_thousands_costs_the_diagnostics_kept() {
    // As clangd reports a file's unused variables, one warning each; one error among them, last.
    let mut diags: Vec<String> = (0..3000)
        .map(|i| {
            format!(
                r#"{{"range":{{"start":{{"line":{i},"character":6}},"end":{{"line":{i},"character":12}}}},"severity":2,"code":"-Wunused-variable","source":"clang","message":"Unused variable 'v{i}'"}}"#
            )
        })
        .collect();
    diags.push(r#"{"range":{"start":{"line":3000,"character":0},"end":{"line":3000,"character":1}},"severity":1,"source":"clang","message":"use of undeclared identifier 'x'"}"#.to_owned());
    let body = format!(
        r#"{{"jsonrpc":"2.0","method":"textDocument/publishDiagnostics","params":{{"uri":"file:///w/a.py","version":1,"diagnostics":[{}]}}}}"#,
        diags.join(",")
    );
    let (taken, peak) = counting_alloc::peak_during(|| {
        claude_ide_bridge_lsp::fuzzing::handle_bodies(&[body.as_bytes()])
    });
    assert_eq!(taken, 1);
    eprintln!(
        "peak memory reading a publish of {} diagnostics ({} bytes): {peak} bytes",
        diags.len(),
        body.len()
    );
    // The 200 kept (about 150 bytes each, with their strings, once converted) and the state's
    // tables: not the message again, nor 3,001 diagnostics (1.2 MB before).
    assert!(
        peak < body.len() / 4,
        "{peak} bytes for a {}-byte message",
        body.len()
    );
}
