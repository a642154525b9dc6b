//! Whether a program file is one this system can run, told before it is started: glibc's
//! `execvp` (which `run`'s command goes through) runs a file the kernel refuses (`ENOEXEC`) with
//! `sh`, so a program built for another machine (an arm64 `claude` in an x86-64 container) was
//! read as a shell script and failed with sh's "Syntax error" on its bytes.
//!
//! Linux only: an ELF file for a machine this one does not run (x86-64 runs i386 programs too,
//! arm64 32-bit ARM ones), or another binary format (Mach-O, a Windows `.exe`), is refused unless
//! a `binfmt_misc` handler registered with the kernel (qemu-user, Wine, WSL's interop) takes it.
//! Only when that can be told: where `binfmt_misc` cannot be read (not mounted, as in most
//! containers, whose host's handlers still apply), nothing is refused. A script, with `#!` or
//! without (which `sh` runs, as a shell would), is never refused. The other Unixes refuse nothing
//! here.

use std::path::Path;

/// Why the program at `path` cannot run here, in words, or `None` when it may (or this cannot be
/// told: the file cannot be read).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn foreign_program(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = Vec::with_capacity(512);
    std::fs::File::open(path)
        .and_then(|f| f.take(512).read_to_end(&mut head))
        .ok()?;
    let why = why_foreign(&head, elf_machine_here()?)?;
    let binfmt = std::path::Path::new("/proc/sys/fs/binfmt_misc");
    // Refused only when no handler takes it for sure.
    (handled_by_binfmt(path, &head, binfmt) == Some(false)).then_some(why)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn foreign_program(_path: &Path) -> Option<String> {
    None
}

/// This build's ELF machine and class (64-bit: 2, else 1), `None` for a machine not listed
/// (nothing is refused then).
#[cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]
pub(super) fn elf_machine_here() -> Option<(u16, u8)> {
    let machine = match std::env::consts::ARCH {
        "x86" => 3,
        "arm" => 40,
        "powerpc" => 20,
        "powerpc64" => 21,
        "s390x" => 22,
        "x86_64" => 62,
        "aarch64" => 183,
        "riscv64" | "riscv32" => 243,
        "loongarch64" => 258,
        _ => return None,
    };
    Some((
        machine,
        if cfg!(target_pointer_width = "64") {
            2
        } else {
            1
        },
    ))
}

/// Why a file starting with `head` is not a program for `here` (its ELF machine and class), or
/// `None`: a script (no NUL byte in its start, `#!` or not), or an ELF file for this machine.
#[cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]
pub(super) fn why_foreign(head: &[u8], here: (u16, u8)) -> Option<String> {
    if head.starts_with(b"#!") || !head.contains(&0) {
        return None;
    }
    if head.len() >= 20 && head.starts_with(b"\x7fELF") {
        let bytes = [head[18], head[19]];
        let machine = match head[5] {
            2 => u16::from_be_bytes(bytes),
            _ => u16::from_le_bytes(bytes),
        };
        // The 32-bit programs of the same family run too (x86-64 runs i386 ones, and most arm64
        // kernels 32-bit ARM ones).
        let also = match here {
            (62, 2) => Some((3, 1)),
            (183, 2) => Some((40, 1)),
            _ => None,
        };
        if (machine, head[4]) == here || Some((machine, head[4])) == also {
            return None;
        }
        return Some(format!(
            "it is a program for another machine (ELF machine {machine}, {}-bit; this one is \
             machine {}, {}-bit)",
            if head[4] == 2 { 64 } else { 32 },
            here.0,
            if here.1 == 2 { 64 } else { 32 },
        ));
    }
    let kind = if head.starts_with(b"MZ") {
        "a Windows program"
    } else if [
        b"\xcf\xfa\xed\xfe",
        b"\xce\xfa\xed\xfe",
        b"\xca\xfe\xba\xbe",
    ]
    .iter()
    .any(|magic| head.starts_with(*magic))
    {
        "a macOS program"
    } else {
        "neither a program for this system nor a script"
    };
    Some(format!("it is {kind}"))
}

/// Whether an enabled `binfmt_misc` handler in `dir` takes the file at `path` starting with
/// `head`: by its magic bytes (under its mask, at its offset) or by its name's extension. `None`
/// when `dir` cannot be read (not mounted): the handlers cannot be told.
#[cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]
pub(super) fn handled_by_binfmt(path: &Path, head: &[u8], dir: &Path) -> Option<bool> {
    let read = |p: &Path| {
        use std::io::Read;
        let mut text = String::new();
        std::fs::File::open(p)
            .and_then(|f| f.take(4096).read_to_string(&mut text))
            .ok()
            .map(|_| text)
    };
    let status = read(&dir.join("status"))?;
    if status.trim() != "enabled" {
        return Some(false);
    }
    let entries = std::fs::read_dir(dir).ok()?;
    Some(entries.flatten().take(256).any(|e| {
        let name = e.file_name();
        if name == "status" || name == "register" {
            return false;
        }
        read(&e.path()).is_some_and(|text| takes(&text, path, head))
    }))
}

/// Whether the handler described by `text` (a `binfmt_misc` entry) is enabled and takes the file.
fn takes(text: &str, path: &Path, head: &[u8]) -> bool {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("enabled") {
        return false;
    }
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
    };
    if let Some(ext) = field("extension ") {
        let ext = ext.strip_prefix('.').unwrap_or(ext);
        return path
            .extension()
            .is_some_and(|e| e.as_encoded_bytes() == ext.as_bytes());
    }
    let Some(magic) = field("magic ").and_then(hex) else {
        return false;
    };
    let mask = field("mask ").and_then(hex);
    let offset: usize = field("offset ").and_then(|o| o.parse().ok()).unwrap_or(0);
    let Some(at) = head.get(offset..offset + magic.len()) else {
        return false;
    };
    at.iter().zip(&magic).enumerate().all(|(i, (b, m))| {
        let mask = mask
            .as_ref()
            .and_then(|k| k.get(i))
            .copied()
            .unwrap_or(0xff);
        b & mask == m & mask
    })
}

/// Hexadecimal digits as bytes.
fn hex(text: &str) -> Option<Vec<u8>> {
    let text = text.as_bytes();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(machine: u16, class: u8) -> Vec<u8> {
        let mut head = b"\x7fELF".to_vec();
        head.extend([class, 1, 1, 0]);
        head.extend([0; 8]);
        head.extend(2u16.to_le_bytes());
        head.extend(machine.to_le_bytes());
        head.extend([0; 44]);
        head
    }

    #[test]
    fn programs_for_another_machine_are_told_apart() {
        let here = (62, 2);
        assert_eq!(why_foreign(&elf(62, 2), here), None);
        let arm = why_foreign(&elf(183, 2), here).unwrap();
        assert!(arm.contains("ELF machine 183, 64-bit"), "{arm}");
        assert!(why_foreign(&elf(62, 1), here).is_some(), "x86-64 as 32-bit");
        assert_eq!(why_foreign(&elf(3, 1), here), None, "i386 on x86-64");
        assert_eq!(
            why_foreign(&elf(40, 1), (183, 2)),
            None,
            "32-bit ARM on arm64"
        );
        assert!(why_foreign(&elf(62, 2), (183, 2)).is_some());
        assert!(why_foreign(b"MZ\x90\x00\x03\x00", here)
            .unwrap()
            .contains("Windows"));
        assert!(why_foreign(b"\xcf\xfa\xed\xfe\x07\x00", here)
            .unwrap()
            .contains("macOS"));
        // Scripts, with `#!` or without, are sh's or their interpreter's.
        assert_eq!(why_foreign(b"#!/bin/sh\nexit 0\n", here), None);
        assert_eq!(why_foreign(b"echo hi\n", here), None);
        assert!(elf_machine_here().is_some());
    }

    #[test]
    fn a_binfmt_handler_takes_what_it_registered() {
        let dir = tempfile::tempdir().unwrap();
        let arm = elf(183, 2);
        let file = Path::new("/x/claude");
        assert_eq!(
            handled_by_binfmt(file, &arm, dir.path()),
            None,
            "not mounted"
        );
        std::fs::write(dir.path().join("status"), "enabled\n").unwrap();
        std::fs::write(dir.path().join("register"), "").unwrap();
        assert_eq!(
            handled_by_binfmt(file, &arm, dir.path()),
            Some(false),
            "no handler"
        );
        // qemu-user's aarch64 entry, as the kernel shows it.
        std::fs::write(
            dir.path().join("qemu-aarch64"),
            "enabled\ninterpreter /usr/bin/qemu-aarch64\nflags: F\noffset 0\n\
             magic 7f454c460201010000000000000000000200b700\n\
             mask ffffffffffffff00fffffffffffffffffeffffff\n",
        )
        .unwrap();
        assert_eq!(handled_by_binfmt(file, &arm, dir.path()), Some(true));
        assert_eq!(
            handled_by_binfmt(file, &elf(75, 2), dir.path()),
            Some(false)
        );
        std::fs::write(dir.path().join("status"), "disabled\n").unwrap();
        assert_eq!(handled_by_binfmt(file, &arm, dir.path()), Some(false));
        std::fs::write(dir.path().join("status"), "enabled\n").unwrap();
        // By extension, as Wine's `.exe` entry may be.
        std::fs::write(
            dir.path().join("wine"),
            "enabled\ninterpreter /usr/bin/wine\nflags: \nextension .exe\n",
        )
        .unwrap();
        let mz = b"MZ\x90\x00\x03\x00";
        let exe = Path::new("/x/claude.exe");
        assert_eq!(handled_by_binfmt(exe, mz, dir.path()), Some(true));
        assert_eq!(handled_by_binfmt(file, mz, dir.path()), Some(false));
    }
}
