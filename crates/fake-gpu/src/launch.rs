//! A kernel launch as the fake queues it on a stream (see `kernels`), kept apart so the
//! stream state can hold one without depending on the kernels' implementation.

/// The digest kernels the fake can run, by the names kernels.cu gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelName {
    Blake3Chunks,
    Blake3Subtrees,
    CrcBlocks,
    CrcCombine,
}

impl KernelName {
    pub fn from_name(name: &str) -> Option<KernelName> {
        Some(match name {
            "aiscp_blake3_chunks" => KernelName::Blake3Chunks,
            "aiscp_blake3_subtrees" => KernelName::Blake3Subtrees,
            "aiscp_crc_blocks" => KernelName::CrcBlocks,
            "aiscp_crc_combine" => KernelName::CrcCombine,
            _ => return None,
        })
    }

    /// Each parameter's size in bytes, in order (pointers and u64 are 8, u32 is 4).
    pub fn params(self) -> &'static [usize] {
        match self {
            KernelName::Blake3Chunks => &[8, 8, 8, 8],
            KernelName::Blake3Subtrees => &[8, 8, 8],
            KernelName::CrcBlocks => &[8, 8, 8, 4, 8],
            KernelName::CrcCombine => &[8, 8, 8, 8, 4, 8],
        }
    }
}

/// A launch as queued: the kernel, its parameters' values read at launch (as a GPU copies
/// them), and how many threads the grid has.
#[derive(Debug, Clone, Copy)]
pub struct Launch {
    pub kernel: KernelName,
    pub args: [u64; 6],
    pub threads: u64,
    pub blocks: u64,
}
