//! Raw `#[repr(C)]` types of hipfile.h 0.2.0 and the function table (CONTRACT SKELETON; issue 2).

pub const STREAM_FIXED_BUF_OFFSET: u32 = 1;
pub const STREAM_FIXED_FILE_OFFSET: u32 = 2;
pub const STREAM_FIXED_FILE_SIZE: u32 = 4;
pub const STREAM_PAGE_ALIGNED_INPUTS: u32 = 8;
/// Linux MAX_RW_COUNT: one read/write moves at most this many bytes.
pub const MAX_IO_BYTES: usize = 0x7fff_f000;
