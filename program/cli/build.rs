//! Links the program without its symbol table in a release build without debug info, as the
//! workspace's `[profile.release]` (`strip = "symbols"`) builds it.
//!
//! `cargo install claude-ide-bridge-cli` builds the package from crates.io with its own manifest
//! as the root, where the workspace's profiles do not apply: cargo's default release profile
//! keeps the symbol table, a fifth of the program (1.6 of 7.9 MB). A profile in this manifest
//! would be ignored, with a warning, on every command run in the workspace; a link argument is
//! not. Only where the linker is a GNU-style `cc` (ELF systems, and Windows with MinGW): macOS
//! strips with a separate tool, and MSVC keeps symbols in a `.pdb`, not in the program.

use std::env::var;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let release = var("PROFILE").as_deref() == Ok("release");
    // Debug info asked for (`debug = 1`, as the `profiling` profile does) keeps the symbols too.
    let debug = var("DEBUG").as_deref() == Ok("true");
    let family = var("CARGO_CFG_TARGET_FAMILY").unwrap_or_default();
    let vendor = var("CARGO_CFG_TARGET_VENDOR").unwrap_or_default();
    let os = var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let gnu_style = (family.split(',').any(|f| f == "unix") && vendor != "apple")
        || (os == "windows" && target_env == "gnu");
    if release && !debug && gnu_style {
        // Not the driver's `-s`: `cc` places it before the `-Wl,` arguments, among them rustc's
        // own `--strip-debug`, which then wins.
        println!("cargo::rustc-link-arg-bins=-Wl,--strip-all");
    }
}
