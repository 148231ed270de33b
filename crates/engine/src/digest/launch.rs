//! The digest kernels on one GPU: loading them, the scratch memory a slot hashes with, and
//! a slice's launches queued on the scratch's window, its piece collected after.

use super::algorithm::Algorithm;
use super::hashing::{Hashing, Queued};
use super::piece::{subtrees, Piece, CHUNK_LEN};
use hipfile::{CopyWindow, Device, DeviceBuffer, Error, Kernel};
use std::ffi::c_void;
use std::ops::Range;

/// Threads per block of every launch.
const THREADS: u32 = 256;
/// Bytes per GPU thread of the CRC kernel (a multiple of 4): 4 KiB keeps a 256 KiB slice
/// on 64 threads and a 64 MiB one on 16 Ki.
const CRC_BLOCK: u64 = 4096;
/// Most BLAKE3 nodes one slice has: one per set bit of its length in chunks and of its
/// start's alignment, far below this for any slice up to 2^64 bytes.
const MAX_NODES: usize = 256;

/// The names of kernels.cu's kernels, as the loaded module is asked for them: BLAKE3's
/// chunk and subtree kernels, then the CRC's block and combine kernels.
pub const KERNEL_NAMES: [&str; 4] = [
    "aiscp_blake3_chunks",
    "aiscp_blake3_subtrees",
    "aiscp_crc_blocks",
    "aiscp_crc_combine",
];

/// The four kernels of kernels.cu, loaded on one GPU.
pub(super) struct Kernels {
    chunks: Kernel,
    subtrees: Kernel,
    crc_blocks: Kernel,
    crc_combine: Kernel,
}

/// One slot's GPU memory for the kernels' intermediate results, and the window that queues
/// a slice's work: the node table up, the launches, the result down, then one wait.
pub struct Scratch {
    // Declared first: the window drains its queued work before the memory goes.
    window: CopyWindow,
    /// Chunk chaining values (32 bytes per KiB of slot), or the CRC of each block.
    values: DeviceBuffer,
    /// The BLAKE3 node table: (first chunk, chunks) per node.
    nodes: DeviceBuffer,
    /// One chaining value per node, or the slice's CRC.
    out: DeviceBuffer,
}

impl Scratch {
    /// Sized for any slice `slot` can hold, on its GPU.
    pub(super) fn new(slot: &DeviceBuffer) -> Result<Scratch, Error> {
        let device = slot.device();
        let chunks = (slot.len() as u64).div_ceil(CHUNK_LEN).max(1);
        Ok(Scratch {
            window: device.alloc_window(MAX_NODES * 32)?,
            values: device.alloc((chunks * 32) as usize)?,
            nodes: device.alloc(MAX_NODES * 16)?,
            out: device.alloc(MAX_NODES * 32)?,
        })
    }
    /// The piece of `queued`, once the window's work is done.
    pub(super) fn collect(&mut self, queued: Queued) -> Result<Piece, Error> {
        let result = &self.window.host()?[..queued.nodes * 32];
        let piece = match queued.algorithm {
            Algorithm::Blake3 => {
                let cvs = result
                    .chunks_exact(32)
                    .map(|c| c.try_into().expect("32 bytes"))
                    .collect();
                Piece::from_subtrees(queued.start, queued.len, cvs, Vec::new())
            }
            algorithm => {
                let crc = u64::from_le_bytes(result[..8].try_into().expect("8 bytes"));
                Piece::from_crc(algorithm, queued.start, queued.len, crc)
            }
        };
        Ok(piece.expect("a result of the queued shape"))
    }
}

/// A kernel argument: a pointer to its value, as the launch calls take them.
fn arg<T>(value: &mut T) -> *mut c_void {
    (value as *mut T).cast()
}

fn blocks(threads: u64) -> u32 {
    u32::try_from(threads.div_ceil(u64::from(THREADS)).max(1)).expect("a slice's grid fits")
}

impl Kernels {
    pub(super) fn load(device: &Device, image: &[u8]) -> Result<Kernels, Error> {
        let module = device.load_module(image)?;
        let [chunks, subtrees, crc_blocks, crc_combine] = KERNEL_NAMES;
        Ok(Kernels {
            chunks: module.kernel(chunks)?,
            subtrees: module.kernel(subtrees)?,
            crc_blocks: module.kernel(crc_blocks)?,
            crc_combine: module.kernel(crc_combine)?,
        })
    }

    /// Queues the slice's hashing on the scratch window: the kernels, then the result's
    /// download. A piece that may be a whole one-chunk file, or has no nodes, is done here.
    pub(super) fn queue(
        &self,
        s: &mut Scratch,
        data: &DeviceBuffer,
        len: u64,
        start: u64,
        algorithm: Algorithm,
    ) -> Result<Hashing, Error> {
        let nodes = match algorithm {
            Algorithm::Blake3 => {
                // A piece that may be a whole file of one chunk keeps its bytes: fetching them
                // costs less than a launch, and they hash on the CPU in no time.
                if Piece::needs_head(start, len) {
                    let mut bytes = vec![0u8; len as usize];
                    data.copy_to_host(0, &mut bytes)?;
                    let piece = Piece::of_bytes(algorithm, start, &bytes);
                    return Ok(Hashing::Done(Some(piece)));
                }
                let nodes = subtrees(start, len);
                if nodes.is_empty() || nodes.len() > MAX_NODES {
                    let none = Piece::from_subtrees(start, len, Vec::new(), Vec::new());
                    return Ok(Hashing::Done(none));
                }
                (self.blake3(s, data, start, &nodes), nodes.len())
            }
            Algorithm::Crc32c | Algorithm::Crc64Nvme => (self.crc(s, data, len, algorithm), 1),
        };
        let nodes = match nodes {
            (Ok(()), nodes) => nodes,
            // What was queued before the failure still reads the slot: it must end first.
            (Err(e), _) => {
                let _ = s.window.wait();
                return Err(e);
            }
        };
        Ok(Hashing::Queued(Queued {
            start,
            len,
            algorithm,
            nodes,
        }))
    }

    /// The chaining values of `nodes` (the slice's subtrees, from `start`), queued.
    fn blake3(
        &self,
        s: &mut Scratch,
        data: &DeviceBuffer,
        start: u64,
        nodes: &[Range<u64>],
    ) -> Result<(), Error> {
        let table: Vec<u8> = nodes
            .iter()
            .flat_map(|n| {
                let first = (n.start - start) / CHUNK_LEN;
                let count = (n.end - n.start).div_ceil(CHUNK_LEN);
                [first.to_le_bytes(), count.to_le_bytes()]
            })
            .flatten()
            .collect();
        s.window.host()?[..table.len()].copy_from_slice(&table);
        s.window.upload(table.len(), &mut s.nodes, 0)?;
        let mut len = nodes.last().map_or(start, |n| n.end) - start;
        let mut data_addr = data.device_address();
        let (mut values, mut out) = (s.values.device_address(), s.out.device_address());
        let mut first_chunk = start / CHUNK_LEN;
        let mut table_addr = s.nodes.device_address();
        // SAFETY: the arguments are aiscp_blake3_chunks' (data, len, first_chunk, cvs) and
        // aiscp_blake3_subtrees' (cvs, nodes, out); the slot holds `len` bytes, `values` a
        // CV per chunk, `out` one per node (<= MAX_NODES); all stay allocated and untouched
        // until the window is waited on.
        unsafe {
            s.window.launch(
                &self.chunks,
                blocks(len.div_ceil(CHUNK_LEN)),
                THREADS,
                0,
                &mut [
                    arg(&mut data_addr),
                    arg(&mut len),
                    arg(&mut first_chunk),
                    arg(&mut values),
                ],
            )?;
            s.window.launch(
                &self.subtrees,
                nodes.len() as u32,
                THREADS,
                0,
                &mut [arg(&mut values), arg(&mut table_addr), arg(&mut out)],
            )?;
        }
        s.window.download(&s.out, 0, nodes.len() * 32)
    }

    /// The slice's CRC, queued: one per block, then combined on the GPU.
    fn crc(
        &self,
        s: &mut Scratch,
        data: &DeviceBuffer,
        len: u64,
        algorithm: Algorithm,
    ) -> Result<(), Error> {
        let mut kind: u32 = match algorithm {
            Algorithm::Crc32c => 0,
            _ => 1,
        };
        let mut data_addr = data.device_address();
        let (mut values, mut out) = (s.values.device_address(), s.out.device_address());
        let (mut len, mut count, mut block) = (len, len.div_ceil(CRC_BLOCK), CRC_BLOCK);
        // SAFETY: the arguments are aiscp_crc_blocks' (data, len, block, kind, crcs) and
        // aiscp_crc_combine's (crcs, count, len, block, kind, out); `values` holds 32 bytes
        // per KiB of slot, more than 8 per 4 KiB block; all stay allocated and untouched
        // until the window is waited on.
        unsafe {
            s.window.launch(
                &self.crc_blocks,
                blocks(count),
                THREADS,
                0,
                &mut [
                    arg(&mut data_addr),
                    arg(&mut len),
                    arg(&mut block),
                    arg(&mut kind),
                    arg(&mut values),
                ],
            )?;
            s.window.launch(
                &self.crc_combine,
                1,
                THREADS,
                0,
                &mut [
                    arg(&mut values),
                    arg(&mut count),
                    arg(&mut len),
                    arg(&mut block),
                    arg(&mut kind),
                    arg(&mut out),
                ],
            )?;
        }
        s.window.download(&s.out, 0, 8)
    }
}
