//! Host memory staging, for machines without a GPU library: each slot is aligned host
//! memory that POSIX reads fill and POSIX writes drain (O_DIRECT-capable alignment).

use super::Staging;
use hipfile::Error;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::convert::Infallible;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;

/// Alignment of host slots: more than any filesystem's direct-I/O alignment we have seen.
const SLOT_ALIGN: usize = 64 * 1024;

pub struct HostStaging;

impl HostStaging {
    pub fn new() -> HostStaging {
        HostStaging
    }
}

impl Default for HostStaging {
    fn default() -> Self {
        Self::new()
    }
}

/// A zeroed, [`SLOT_ALIGN`]-aligned heap buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize) -> Result<AlignedBuf, Error> {
        let oom = || {
            Error::Os(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("cannot allocate {len} bytes of host memory"),
            ))
        };
        let layout = Layout::from_size_align(len.max(1), SLOT_ALIGN).map_err(|_| oom())?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }).ok_or_else(oom)?;
        Ok(AlignedBuf { ptr, layout })
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() initialised (zeroed) bytes, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl Staging for HostStaging {
    type Slot = AlignedBuf;
    type Handle<'fd> = Infallible;

    fn name(&self) -> &'static str {
        "host memory"
    }
    fn has_direct_route(&self) -> bool {
        false
    }
    fn slot_alignment(&self) -> u64 {
        SLOT_ALIGN as u64
    }
    fn enter_worker(&self) -> Result<(), Error> {
        Ok(())
    }
    fn alloc_slot(&self, len: usize) -> Result<AlignedBuf, Error> {
        AlignedBuf::new(len)
    }
    fn slot_refusal<'s>(&self, _: &'s AlignedBuf) -> Option<&'s str> {
        None
    }
    fn register<'fd>(&self, _fd: BorrowedFd<'fd>) -> Result<Option<Infallible>, Error> {
        Ok(None)
    }
    fn read(
        &self,
        file: &Infallible,
        _: &mut AlignedBuf,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<usize, Error> {
        match *file {}
    }
    fn write(
        &self,
        file: &Infallible,
        _: &mut AlignedBuf,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<usize, Error> {
        match *file {}
    }
    type Stream<'s> = Infallible;
    fn check_async(&self) -> Result<(), Error> {
        Err(Error::Os(std::io::Error::other(
            "host memory staging has no asynchronous I/O",
        )))
    }
    fn open_stream<'s>(&'s self, _: &'s mut AlignedBuf) -> Result<Option<Infallible>, Error> {
        Ok(None)
    }
    fn submit_read(
        &self,
        stream: &mut Infallible,
        _: &Infallible,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<(), Error> {
        match *stream {}
    }
    fn submit_write(
        &self,
        stream: &mut Infallible,
        _: &Infallible,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<(), Error> {
        match *stream {}
    }
    fn sync_stream(&self, stream: &mut Infallible) -> Result<Vec<Result<usize, Error>>, Error> {
        match *stream {}
    }
    fn window<'s>(&self, slot: &'s mut AlignedBuf) -> Result<&'s mut [u8], Error> {
        Ok(slot.as_mut_slice())
    }
    fn upload(&self, _: &mut AlignedBuf, slot_off: usize, _: usize) -> Result<(), Error> {
        debug_assert_eq!(slot_off, 0, "the host window is the whole slot");
        Ok(())
    }
    fn download(&self, _: &mut AlignedBuf, slot_off: usize, _: usize) -> Result<(), Error> {
        debug_assert_eq!(slot_off, 0, "the host window is the whole slot");
        Ok(())
    }
}
