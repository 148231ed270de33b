//! Helpers shared by the engine's suites: driving the engine as a library, random data and
//! sparse files, and the fake GPU library (test-support builds it and reads its report).

use aiscp_engine::{
    BackendChoice, ChunkSize, Config, CopyError, DataJob, Diagnostics, Engine, NoProgress,
    ProgressSink, SourceKind, SparseMode,
};
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// An engine on `backend` with `chunk`-byte slices, `slots_per_gpu` of them; a warning fails the test.
pub fn start_engine(backend: BackendChoice, chunk: u64, streams: usize, async_io: bool) -> Engine {
    let config = Config {
        backend,
        chunk_size: Some(chunk_size(chunk)),
        slots_per_gpu: Some(streams),
        async_io,
        ..Config::default()
    };
    Engine::start(config, Box::new(NoWarnings)).unwrap()
}

/// A valid chunk size of `bytes`.
pub fn chunk_size(bytes: u64) -> ChunkSize {
    ChunkSize::new(bytes).unwrap()
}

/// Diagnostics for a test that expects no warning: one fails it; --debug lines are dropped.
pub struct NoWarnings;

impl Diagnostics for NoWarnings {
    fn warn(&mut self, line: &str) {
        panic!("unexpected warning: {line}");
    }
    fn debug(&mut self, _: std::time::Duration, _: &str) {}
}

/// Diagnostics that drop everything.
pub struct Silent;

impl Diagnostics for Silent {
    fn warn(&mut self, _: &str) {}
    fn debug(&mut self, _: std::time::Duration, _: &str) {}
}

/// DST opened as cp opens an existing one: truncated in place (created when missing).
pub fn open_dst(path: &Path) -> File {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap()
}

/// Copies the regular file `src` to `dst` with `engine`, as the cp layer would.
pub fn copy_file(
    engine: &mut Engine,
    src: &Path,
    dst: &Path,
    sparse: SparseMode,
) -> Result<u64, CopyError> {
    let s = File::open(src).unwrap();
    let d = open_dst(dst);
    let len = s.metadata().unwrap().len();
    engine
        .copy(
            &DataJob {
                src: &s,
                src_name: src,
                src_kind: SourceKind::Regular { len },
                dst: &d,
                dst_name: dst,
                sparse,
                digest: None,
            },
            &NoProgress,
        )
        .map(|copied| copied.size)
}

/// Sets the cancel flag once `after` bytes were reported, as a signal handler would mid-copy.
pub struct CancelAfter {
    pub cancel: Arc<AtomicBool>,
    pub after: u64,
    pub seen: AtomicU64,
}

impl CancelAfter {
    pub fn new(cancel: &Arc<AtomicBool>, after: u64) -> CancelAfter {
        CancelAfter {
            cancel: Arc::clone(cancel),
            after,
            seen: AtomicU64::new(0),
        }
    }
}

impl ProgressSink for CancelAfter {
    fn file_started(&self, _: &Path, _: Option<u64>) {}
    fn advanced(&self, bytes: u64) {
        if self.seen.fetch_add(bytes, Ordering::SeqCst) + bytes >= self.after {
            self.cancel.store(true, Ordering::SeqCst);
        }
    }
    fn file_finished(&self) {}
}

pub use test_support::data::{assert_same_bytes, blocks, random_bytes, write_random, write_sparse};
pub use test_support::fake_gpu::Report;

/// Points a child's engine at the fake GPU library (as both hipFile and the HIP runtime); the
/// fake writes its exit report to `report`. The digest kernels' cache goes beside it, out of
/// the user's.
pub fn use_fake_gpu(cmd: &mut Command, report: &Path) {
    let lib = test_support::fake_gpu::library();
    cmd.env("XDG_CACHE_HOME", report.with_extension("cache"))
        .env("AISCP_HIPFILE_LIB", lib)
        .env("AISCP_HIP_LIB", lib)
        .env("AISCP_HIPRTC_LIB", lib)
        .env("AISCP_FAKE_GPU_REPORT", report);
}
