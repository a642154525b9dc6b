#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| claude_ide_bridge_fuzz::lsp(data));
