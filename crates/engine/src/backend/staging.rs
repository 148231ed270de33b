//! The traits every backend answers to ([`Staging`], [`LibraryIo`], [`StreamIo`]) and
//! [`NoLibrary`], the library half of a backend that has none.

use super::kind::Backend;
use crate::digest::{Algorithm, Hashing, Piece, Queued};
use crate::transfer::Way;
use hipfile::Error;
use std::convert::Infallible;
use std::marker::PhantomData;
use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Staging memory and the bounce route. Shared by the workers of a copy, hence `Sync`.
pub trait Staging: Sync {
    /// One worker's staging memory, reused across slices and files.
    type Slot: Send;
    /// The library route, where this backend has one.
    type Library: StreamIo<Slot = Self::Slot>;

    /// "hipFile", "cuFile" or "host memory", for messages.
    fn name(&self) -> Backend;
    /// What a slot is made of ("GPU memory", "host memory"), for allocation errors.
    fn memory(&self) -> &'static str;
    /// The library route, when registered files take it; None when every file bounces.
    fn library(&self) -> Option<&Self::Library>;
    /// The address alignment every slot and window is guaranteed to have.
    fn slot_alignment(&self) -> u64;
    /// How many GPUs the slots are spread over (1 on the host backend).
    fn devices(&self) -> usize {
        1
    }
    /// The GPU (its index) whose memory `slot` is, for --debug; None on host memory.
    fn gpu_of(&self, _slot: &Self::Slot) -> Option<u32> {
        None
    }
    /// Prepares the calling thread to work with `slot` (makes its GPU current: that is per
    /// thread).
    fn enter_worker(&self, slot: &Self::Slot) -> Result<(), Error>;
    /// Allocates a slot of `len` bytes on device `device` (< [`Staging::devices`]).
    fn alloc_slot(&self, len: usize, device: usize) -> Result<Self::Slot, Error>;
    /// Bytes the slot holds: the most one read into it may bring.
    fn slot_len(&self, slot: &Self::Slot) -> usize;
    /// Bytes one window holds: the bounce route moves a slice in pieces of this size.
    fn window_len(&self, slot: &Self::Slot) -> usize;
    /// The host bytes for the piece at `slot_off`, in window `k` (0 or 1: the bounce route
    /// alternates them so one is in flight to or from the slot while the other is read or
    /// written). Waits for window `k`'s queued copies; allocates it on first use.
    fn window<'s>(
        &self,
        slot: &'s mut Self::Slot,
        k: usize,
        slot_off: usize,
    ) -> Result<&'s mut [u8], Error>;
    /// Queues the copy of window `k`'s first `len` bytes into the slot at `slot_off`.
    fn upload(
        &self,
        slot: &mut Self::Slot,
        k: usize,
        len: usize,
        slot_off: usize,
    ) -> Result<(), Error>;
    /// Queues the copy of `len` bytes of the slot at `slot_off` into window `k`.
    fn download(
        &self,
        slot: &mut Self::Slot,
        k: usize,
        slot_off: usize,
        len: usize,
    ) -> Result<(), Error>;
    /// Waits for every queued copy of the slot's windows (before library I/O reads the slot).
    fn settle(&self, slot: &mut Self::Slot) -> Result<(), Error>;
    /// Whether the windows and the slot are apart, so that [`Staging::window`],
    /// [`Staging::upload`], [`Staging::download`] and [`Staging::settle`] move or wait for
    /// bytes and their time is worth a clock's two reads (host memory: the window is the
    /// slot, and they do nothing).
    fn windows_apart(&self) -> bool {
        true
    }
    /// The digest piece of the slot's first `len` bytes, which DEST receives at `start`,
    /// taken where they are staged, or queued there ([`Staging::hashed`] collects it; the
    /// slot's bytes must not change before). `Done(None)`: this backend does not hash its
    /// slots, and the file's digest reads those bytes back from DEST
    /// ([`crate::digest::Pieces::finish`]).
    fn hash(
        &self,
        _slot: &mut Self::Slot,
        _len: usize,
        _start: u64,
        _algorithm: Algorithm,
    ) -> Result<Hashing, Error> {
        Ok(Hashing::Done(None))
    }
    /// The piece of work [`Staging::hash`] queued on `slot`, once it is done.
    fn hashed(&self, _slot: &mut Self::Slot, _queued: Queued) -> Result<Option<Piece>, Error> {
        Ok(None)
    }
    /// [`Staging::hash`], waiting for the piece (for tests).
    fn hash_now(
        &self,
        slot: &mut Self::Slot,
        len: usize,
        start: u64,
        algorithm: Algorithm,
    ) -> Result<Option<Piece>, Error> {
        match self.hash(slot, len, start, algorithm)? {
            Hashing::Done(piece) => Ok(piece),
            Hashing::Queued(queued) => self.hashed(slot, queued),
        }
    }
    /// For --debug at the end of the run: where this backend computed digests, and why
    /// there; None when it has nothing to say.
    fn digests_computed(&self) -> Option<String> {
        None
    }
    /// For --debug at the end of the run: how the bounce windows' host memory was pinned;
    /// None when there is nothing to pin (host memory) or no window was allocated.
    fn windows_pinned(&self) -> Option<String> {
        None
    }
    /// At the end of a one-off run: waits, briefly and until `stop` is set, for the digest
    /// kernels' compile still under way, so that it reaches the kernel cache; returns how
    /// long it waited (None: no wait).
    fn wait_for_digest_compile(&self, _stop: &AtomicBool) -> Option<Duration> {
        None
    }
}

/// Library I/O on registered files, straight into a slot's device memory (the direct route).
pub trait LibraryIo: Sync {
    type Slot;
    /// A registered file; the workers of a copy share it.
    type Handle<'fd>: Sync;
    /// Why library I/O cannot use `slot` (its buffer registration was refused); such a slot
    /// bounces even on registered files.
    fn slot_refusal<'s>(&self, slot: &'s Self::Slot) -> Option<&'s str>;
    /// Registers an O_DIRECT fd. `Ok(None)`: refused in a way the bounce route serves
    /// (tmpfs, FUSE: 5027, 5008, 5030).
    fn register<'fd>(&self, fd: BorrowedFd<'fd>) -> Result<Option<Self::Handle<'fd>>, Error>;
    /// One library read of up to `len` bytes at `file_off` into the slot at `slot_off`.
    fn read(
        &self,
        file: &Self::Handle<'_>,
        slot: &mut Self::Slot,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<usize, Error>;
    /// One library write of up to `len` bytes from the slot at `slot_off` to `file_off`.
    fn write(
        &self,
        file: &Self::Handle<'_>,
        slot: &mut Self::Slot,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<usize, Error>;
}

/// The library's stream API (`--async`): ops queued on a registered stream bound to a slot.
pub trait StreamIo: LibraryIo {
    type Stream<'s>
    where
        Self: 's;
    /// Whether the library has the stream API (checked once at start).
    fn check_async(&self) -> Result<(), Error>;
    /// A stream whose ops move bytes between files and `slot`; None when the slot cannot
    /// take library I/O (its registration was refused).
    fn open_stream<'s>(
        &'s self,
        slot: &'s mut Self::Slot,
    ) -> Result<Option<Self::Stream<'s>>, Error>;
    /// Queues a library op of `len` bytes: a read at `file_off` into the slot at
    /// `slot_off`, or a write from there to `file_off`.
    fn submit<'s>(
        &self,
        stream: &mut Self::Stream<'s>,
        way: Way,
        file: &'s Self::Handle<'_>,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<(), Error>;
    /// Waits for the queued ops; each op's count or error, in submission order. The outer
    /// error is the stream failing to synchronize.
    #[allow(clippy::type_complexity)]
    fn sync_stream(
        &self,
        stream: &mut Self::Stream<'_>,
    ) -> Result<Vec<Result<usize, Error>>, Error>;
    /// The digest piece of the stream's slot's first `len` bytes, which DEST received at
    /// `start` (every op on the stream synchronized), computed where they are staged and
    /// waited for: nothing else runs on the stream's worker until its next slice. None as
    /// [`Staging::hash`] gives none.
    fn hash_staged(
        &self,
        stream: &mut Self::Stream<'_>,
        len: usize,
        start: u64,
        algorithm: Algorithm,
    ) -> Result<Option<Piece>, Error>;
}

/// The library route of a backend that has none: no value of it exists, so
/// [`Staging::library`] can only answer `None`, and the methods below cannot be reached.
pub enum NoLibrary<Slot> {
    #[allow(dead_code)] // never built: Infallible has no values
    Never(Infallible, PhantomData<fn() -> Slot>),
}

impl<Slot> NoLibrary<Slot> {
    fn never(&self) -> ! {
        match self {
            NoLibrary::Never(never, _) => match *never {},
        }
    }
}

impl<Slot> LibraryIo for NoLibrary<Slot> {
    type Slot = Slot;
    type Handle<'fd> = Infallible;
    fn slot_refusal<'s>(&self, _: &'s Slot) -> Option<&'s str> {
        self.never()
    }
    fn register<'fd>(&self, _: BorrowedFd<'fd>) -> Result<Option<Infallible>, Error> {
        self.never()
    }
    fn read(
        &self,
        _: &Infallible,
        _: &mut Slot,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<usize, Error> {
        self.never()
    }
    fn write(
        &self,
        _: &Infallible,
        _: &mut Slot,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<usize, Error> {
        self.never()
    }
}

impl<Slot> StreamIo for NoLibrary<Slot> {
    type Stream<'s>
        = Infallible
    where
        Self: 's;
    fn check_async(&self) -> Result<(), Error> {
        self.never()
    }
    fn open_stream<'s>(&'s self, _: &'s mut Slot) -> Result<Option<Infallible>, Error> {
        self.never()
    }
    fn submit(
        &self,
        _: &mut Infallible,
        _: Way,
        _: &Infallible,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<(), Error> {
        self.never()
    }
    fn hash_staged(
        &self,
        _: &mut Infallible,
        _: usize,
        _: u64,
        _: Algorithm,
    ) -> Result<Option<Piece>, Error> {
        self.never()
    }
    fn sync_stream(&self, _: &mut Infallible) -> Result<Vec<Result<usize, Error>>, Error> {
        self.never()
    }
}
