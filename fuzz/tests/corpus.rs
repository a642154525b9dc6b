//! Replays every committed corpus file through every target, on stable Rust without libFuzzer,
//! and checks that the generated seeds are committed.

use claude_ide_bridge_fuzz::{
    decode_ops, encode_ops, frames, jsonrpc, lsp, seeds, server, text, upgrade,
};
use std::fs;
use std::path::{Path, PathBuf};

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 6] = [
    ("upgrade", upgrade),
    ("frames", frames),
    ("jsonrpc", jsonrpc),
    ("server", server),
    ("text", text),
    ("lsp", lsp),
];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

fn files(target: &str) -> Vec<PathBuf> {
    let dir = corpus_dir().join(target);
    let mut v: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// Each target's own corpus through that target.
#[test]
fn replay_each_corpus_through_its_target() {
    for (name, target) in TARGETS {
        let files = files(name);
        assert!(!files.is_empty(), "no corpus for {name}");
        for path in files {
            eprintln!("{name} <- {}", path.display());
            target(&fs::read(&path).expect("readable"));
        }
    }
}

/// Every corpus file through every other target too: different input, same robustness.
#[test]
fn replay_every_corpus_through_every_target() {
    for (corpus, _) in TARGETS {
        for path in files(corpus) {
            let data = fs::read(&path).expect("readable");
            for (name, target) in TARGETS {
                eprintln!("{name} <- {}", path.display());
                target(&data);
            }
        }
    }
}

#[test]
fn seeds_are_committed() {
    let write = std::env::var_os("FUZZ_WRITE_SEEDS").is_some();
    for s in seeds::all() {
        let path = corpus_dir().join(s.target).join(s.name);
        if write {
            fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            fs::write(&path, &s.bytes).expect("write");
        }
        let on_disk = fs::read(&path).unwrap_or_default();
        assert!(
            on_disk == s.bytes,
            "{} differs from its generator: run FUZZ_WRITE_SEEDS=1 cargo test",
            path.display()
        );
    }
}

#[test]
fn ops_round_trip_through_their_encoding() {
    for s in seeds::all().into_iter().filter(|s| s.target == "server") {
        let ops = decode_ops(&s.bytes[1..]);
        assert_eq!(encode_ops(&ops), s.bytes[1..], "{}", s.name);
    }
}
