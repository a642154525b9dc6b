//! A replaced file's extended attributes, kept by the file replacing it (Unix): a write is a new
//! file renamed over the old one, which has none of the old one's attributes unless they are
//! copied. On Linux they hold the file's POSIX ACL (`system.posix_acl_access`: other users'
//! grants, and through its mask what the owning group may do), the user's own `user.*` tags,
//! and the SELinux label; on macOS Finder's tags and the quarantine flag among others.
//!
//! What the old file has is given to the new one; what the new one got from its directory (a
//! default ACL, inherited at creation) and the old one did not have is taken off, so that a
//! write never lets anyone read or write the file who could not before. An attribute the
//! system keeps for itself (`security.*`, `trusted.*` without the privilege, an Apple one the
//! system refuses) is left as the system makes it; the ACL and `user.*` ones are kept or the
//! write is refused. Other Unixes: nothing is copied (no call for it there).
//!
//! macOS keeps a file's ACL out of its listed attributes (`com.apple.system.Security`, which the
//! system lists and hands to no program without an entitlement): a write there does not keep
//! an ACL, and the file has what its folder gives a new file (SECURITY.md, "Known limits").

use std::io;
use std::os::fd::BorrowedFd;

/// The most bytes of attribute names, and of one attribute's value, a file's attributes are
/// copied with (Linux allows 64 KiB of each; a larger one is refused, not dropped).
const MAX_BYTES: usize = 1024 * 1024;

/// Whether the attribute `name` must be kept (or, on the new file only, taken off) for the write
/// to go on: the ACL (who may read and write) and the user's own ones.
fn must_keep(name: &[u8]) -> bool {
    name.starts_with(b"user.") || name.starts_with(b"system.posix_acl_")
}

/// Gives `to` (the new file, not yet in place) the extended attributes of `from` (the file it
/// replaces), and takes off those `to` has that `from` has not. An error (with what failed)
/// when one that must be kept cannot be.
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
pub(crate) fn copy(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
) -> Result<(), (&'static str, io::Error)> {
    use rustix::fs::{fgetxattr, fgetxattr_query, flistxattr, flistxattr_query, fremovexattr};
    use rustix::fs::{fsetxattr, XattrFlags};

    let names = |fd: BorrowedFd<'_>| -> io::Result<Vec<Vec<u8>>> {
        let len = match flistxattr_query(fd) {
            Ok(len) => len,
            // No attributes on this file system (macOS says `ENOTSUP`, another number there).
            Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOTSUP => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(e.into()),
        };
        if len > MAX_BYTES {
            return Err(io::Error::other(format!("{len} bytes of attribute names")));
        }
        let mut list = vec![0u8; len];
        let got = flistxattr(fd, &mut list[..])?;
        list.truncate(got);
        Ok((list.split(|b| *b == 0))
            .filter(|n| !n.is_empty())
            .map(<[u8]>::to_vec)
            .collect())
    };
    let had = names(from).map_err(|e| ("listing the file's extended attributes", e))?;
    for name in &had {
        let value = fgetxattr_query(from, name.as_slice())
            .and_then(|len| {
                if len > MAX_BYTES {
                    return Err(rustix::io::Errno::TOOBIG);
                }
                let mut value = vec![0u8; len];
                let got = fgetxattr(from, name.as_slice(), &mut value[..])?;
                value.truncate(got);
                Ok(value)
            })
            .map_err(io::Error::from);
        let set = value.and_then(|v| {
            fsetxattr(to, name.as_slice(), &v, XattrFlags::empty()).map_err(io::Error::from)
        });
        if let Err(e) = set {
            if must_keep(name) {
                return Err(("keeping the file's extended attributes", e));
            }
        }
    }
    let has = names(to).map_err(|e| ("listing the new file's extended attributes", e))?;
    for name in has.iter().filter(|n| !had.contains(n)) {
        if let Err(e) = fremovexattr(to, name.as_slice()) {
            // (Unless gone meanwhile.)
            if must_keep(name) && fgetxattr_query(to, name.as_slice()).is_ok() {
                return Err(("taking off an attribute the file did not have", e.into()));
            }
        }
    }
    Ok(())
}

/// Other Unixes: nothing (see the module's doc).
#[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
pub(crate) fn copy(
    _from: BorrowedFd<'_>,
    _to: BorrowedFd<'_>,
) -> Result<(), (&'static str, io::Error)> {
    Ok(())
}
