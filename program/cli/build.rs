//! Links the program without its symbol table in a release build without debug info, as the
//! workspace's `[profile.release]` (`strip = "symbols"`) builds it.
//!
//! `cargo install claude-ide-bridge-cli` builds the package from crates.io with its own manifest
//! as the root, where the workspace's profiles do not apply: cargo's default release profile
//! keeps the symbol table, a fifth of the program (1.6 of 7.9 MB). A profile in this manifest
//! would be ignored, with a warning, on every command run in the workspace; a link argument is
//! not. Only where the linker is known to be a GNU-style `cc` (Linux and Windows with the GNU
//! toolchain, no other linker configured nor chosen by flags): `rust-lld` called directly (the musl targets' default
//! when cross-compiling) takes no `-Wl,`, macOS strips with a separate tool, and MSVC keeps
//! symbols in a `.pdb`, not in the program.

use std::env::var;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let release = var("PROFILE").as_deref() == Ok("release");
    // Debug info asked for (`debug = 1`, as the `profiling` profile does) keeps the symbols too.
    let debug = var("DEBUG").as_deref() == Ok("true");
    let os = var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // A linker configured for the target (`target.<triple>.linker`) is named here; only a `cc`,
    // `gcc` or `clang` driver takes the argument below.
    let driver = var("RUSTC_LINKER").map_or(true, |l| {
        let name = std::path::Path::new(&l)
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        name == "cc" || name.ends_with("-cc") || name.contains("gcc") || name.contains("clang")
    });
    // Nor one chosen by flags (`-C linker=...`, `-C linker-flavor=...`), which it does not name.
    let flags = var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let driver = driver && !flags.contains("linker");
    let gnu_style = matches!(os.as_str(), "linux" | "windows") && target_env == "gnu" && driver;
    if release && !debug && gnu_style {
        // Not the driver's `-s`: `cc` places it before the `-Wl,` arguments, among them rustc's
        // own `--strip-debug`, which then wins.
        println!("cargo::rustc-link-arg-bins=-Wl,--strip-all");
    }
}
