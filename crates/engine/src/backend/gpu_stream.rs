//! `--async` on the GPU: a slot's registered buffer with a registered stream, the engine's
//! reads and writes queued on it.

use super::gpu::{GpuSlot, GpuStaging, SlotMemory};
use super::staging::StreamIo;
use crate::digest::launch::Scratch;
use crate::digest::{Algorithm, Hashing, Piece};
use crate::transfer::Way;
use hipfile::{Error, FileHandle, RegisteredBuffer};

/// Stream registration flags for `--async`. All four hold for the engine's ops: each op's
/// size and offsets are written into its parameter block at submission and never changed
/// before the stream is synchronized (the FIXED_* flags), and the engine only issues
/// requests whose size, file offset and buffer offset are multiples of 4096 (direct I/O
/// demands it anyway), so the library may read them at submission and skip its alignment
/// checks.
pub const STREAM_FLAGS: u32 = hipfile::sys::STREAM_FIXED_BUF_OFFSET
    | hipfile::sys::STREAM_FIXED_FILE_OFFSET
    | hipfile::sys::STREAM_FIXED_FILE_SIZE
    | hipfile::sys::STREAM_PAGE_ALIGNED_INPUTS;

/// A registered stream whose ops use one slot's registered buffer, with the slot's digest
/// scratch (the stream holds the slot, and a slice is hashed where it is staged).
pub struct GpuStream<'s> {
    stream: hipfile::Stream<'s>,
    buffer: &'s RegisteredBuffer,
    scratch: &'s mut Option<Scratch>,
    gpu: usize,
}

impl StreamIo for GpuStaging {
    type Stream<'s> = GpuStream<'s>;

    /// Creates one registered stream and drops it.
    fn check_async(&self) -> Result<(), Error> {
        self.devices[0].create_stream(STREAM_FLAGS).map(drop)
    }
    fn open_stream<'s>(&'s self, slot: &'s mut GpuSlot) -> Result<Option<GpuStream<'s>>, Error> {
        let GpuSlot {
            scratch,
            gpu,
            device,
            ..
        } = slot;
        match &*device {
            SlotMemory::Registered(buffer) => Ok(Some(GpuStream {
                stream: buffer.buffer().device().create_stream(STREAM_FLAGS)?,
                buffer,
                scratch,
                gpu: *gpu,
            })),
            SlotMemory::Unregistered { .. } => Ok(None),
        }
    }
    fn submit<'s>(
        &self,
        stream: &mut GpuStream<'s>,
        way: Way,
        file: &'s FileHandle<'_>,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<(), Error> {
        let (stream, buffer) = (&mut stream.stream, stream.buffer);
        match way {
            Way::Read => stream.read_async(file, buffer, len, file_off, slot_off),
            Way::Write => stream.write_async(file, buffer, len, file_off, slot_off),
        }
        .map(drop)
    }
    fn sync_stream(&self, stream: &mut GpuStream<'_>) -> Result<Vec<Result<usize, Error>>, Error> {
        stream.stream.synchronize_each()
    }
    fn hash_staged(
        &self,
        stream: &mut GpuStream<'_>,
        len: usize,
        start: u64,
        algorithm: Algorithm,
    ) -> Result<Option<Piece>, Error> {
        let GpuStream {
            buffer,
            scratch,
            gpu,
            ..
        } = stream;
        match self
            .digests
            .hash(*gpu, scratch, buffer.buffer(), len, start, algorithm)?
        {
            Hashing::Done(piece) => Ok(piece),
            Hashing::Queued(queued) => self.digests.hashed(scratch, queued).map(Some),
        }
    }
}
