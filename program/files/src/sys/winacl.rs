//! A replaced file's access list (its DACL), given to the file replacing it (Windows). A write is
//! a new file renamed over the old one, and a new file gets the access list its folder passes
//! on: a file only its owner could read (a `.env` given a protected, owner-only list) in a folder
//! every user may read became readable by every user at its next write. The new file is given
//! the old one's list (protected or not: an unprotected one takes again what the folder passes
//! on), before anything is written to it and while no other handle can be opened on it, or the
//! write is refused. A volume without access lists (FAT) has nothing to keep.
//!
//! The calls are Win32's `GetSecurityInfo` and `SetSecurityInfo` (advapi32), by handle: no crate
//! does this by handle, and no path is named (the crate's Windows backend names none). The one
//! module of the crate with `unsafe` code: each call's safety is said where it is made.
#![allow(unsafe_code)]

use std::io;
use std::os::windows::io::AsRawHandle;
use std::ptr::null_mut;

use windows_sys::Win32::Foundation::{LocalFree, ERROR_NOT_SUPPORTED, ERROR_SUCCESS, HANDLE};
use windows_sys::Win32::Security::Authorization::{
    GetSecurityInfo, SetSecurityInfo, SE_FILE_OBJECT,
};
use windows_sys::Win32::Security::{
    GetSecurityDescriptorControl, ACL, DACL_SECURITY_INFORMATION,
    PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, SE_DACL_PROTECTED,
    UNPROTECTED_DACL_SECURITY_INFORMATION,
};

/// The `READ_CONTROL` access right: what reading a file's access list takes.
pub(crate) const READ_CONTROL: u32 = 0x0002_0000;
/// The `WRITE_DAC` access right: what giving a file an access list takes.
pub(crate) const WRITE_DAC: u32 = 0x0004_0000;

/// A file's access list, as read from it (the security descriptor the system allocated, freed
/// when this is dropped).
pub(crate) struct AccessList {
    descriptor: PSECURITY_DESCRIPTOR,
    /// Inside `descriptor`; null for a null list (everyone may do everything).
    dacl: *mut ACL,
    /// Whether it takes nothing from the folder (`SE_DACL_PROTECTED`).
    protected: bool,
}

impl AccessList {
    /// The access list of `file`, opened with [`READ_CONTROL`]; `None` on a volume without access
    /// lists.
    pub(crate) fn of(file: &impl AsRawHandle) -> io::Result<Option<AccessList>> {
        let mut dacl: *mut ACL = null_mut();
        let mut descriptor: PSECURITY_DESCRIPTOR = null_mut();
        // SAFETY: the handle is open for as long as `file` is borrowed; every out-pointer is a
        // local of the right type, the ones not asked for null. On success the system allocated
        // `descriptor` (freed by `Drop`, with `LocalFree`), and `dacl` points into it.
        let status = unsafe {
            GetSecurityInfo(
                file.as_raw_handle() as HANDLE,
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION,
                null_mut(),
                null_mut(),
                &mut dacl,
                null_mut(),
                &mut descriptor,
            )
        };
        match status {
            ERROR_SUCCESS => {}
            ERROR_NOT_SUPPORTED => return Ok(None),
            e => return Err(io::Error::from_raw_os_error(e as i32)),
        }
        let mut list = AccessList {
            descriptor,
            dacl,
            protected: false,
        };
        let (mut control, mut revision) = (0u16, 0u32);
        // SAFETY: `descriptor` is the valid descriptor the call above returned; both
        // out-pointers are locals.
        let ok =
            unsafe { GetSecurityDescriptorControl(list.descriptor, &mut control, &mut revision) };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        list.protected = control & SE_DACL_PROTECTED != 0;
        Ok(Some(list))
    }

    /// Gives this list to `file`, opened with [`WRITE_DAC`].
    pub(crate) fn give(&self, file: &impl AsRawHandle) -> io::Result<()> {
        let inherit = if self.protected {
            PROTECTED_DACL_SECURITY_INFORMATION
        } else {
            UNPROTECTED_DACL_SECURITY_INFORMATION
        };
        // SAFETY: the handle is open for as long as `file` is borrowed; `dacl` is null or points
        // into `descriptor`, alive as long as `self`; the owner, group and SACL are not set (null).
        let status = unsafe {
            SetSecurityInfo(
                file.as_raw_handle() as HANDLE,
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION | inherit,
                null_mut(),
                null_mut(),
                self.dacl,
                null_mut(),
            )
        };
        match status {
            ERROR_SUCCESS => Ok(()),
            e => Err(io::Error::from_raw_os_error(e as i32)),
        }
    }
}

impl Drop for AccessList {
    fn drop(&mut self) {
        // SAFETY: `descriptor` was allocated by `GetSecurityInfo` for this value alone, and is
        // freed once, here.
        unsafe { LocalFree(self.descriptor) };
    }
}
