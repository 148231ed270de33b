//! What the caller asks of a backend ([`Request`] and its choices), and the one place a
//! route is chosen ([`resolve_route`]).

use super::gpu;
use hipfile::Flavor;

/// Which staging backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// hipFile, then cuFile, then host memory (with a warning).
    #[default]
    Auto,
    /// hipFile or cuFile; an error if neither loads.
    Gpu,
    HipFile,
    CuFile,
    Host,
}

/// How data moves between the files and GPU memory on GPU backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RouteChoice {
    /// The library's route where it can DMA between storage and GPU memory (hipFile; cuFile
    /// with nvidia-fs), aiscp's own bounce route where the library would only emulate it
    /// (cuFile in compatibility mode does POSIX I/O plus copies itself, one request at a time).
    #[default]
    Auto,
    /// Always hipFileRead/hipFileWrite on registered files.
    Library,
    /// Always aiscp's own: POSIX I/O into pinned host memory, copied to and from the device
    /// buffer, pipelined over the slices in flight.
    Bounce,
}

/// Which GPUs stage the data. With several, each GPU gets its own slots (`slots_per_gpu` of them)
/// and a file's slices go to whichever of its GPUs' slots is free.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuChoice {
    /// These devices, by index, in this order (no repeats; checked against the device count).
    List(Vec<u32>),
    /// Every device.
    All,
    /// Every device; each file uses the one(s) nearest its storage
    /// (`devices::Topology`), all of them where that is unknown.
    Auto,
    /// Device `n` modulo the device count: an MPI rank's node-local rank, so the ranks of a
    /// node share its GPUs out.
    Local(u32),
}

impl std::fmt::Display for GpuChoice {
    /// As given on the command line: "3", "0,2,3", "all", "auto".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuChoice::List(v) => {
                let list: Vec<String> = v.iter().map(u32::to_string).collect();
                f.write_str(&list.join(","))
            }
            GpuChoice::All => f.write_str("all"),
            GpuChoice::Auto => f.write_str("auto"),
            GpuChoice::Local(n) => write!(f, "{n} modulo the GPUs (node-local rank)"),
        }
    }
}

impl Default for GpuChoice {
    fn default() -> GpuChoice {
        GpuChoice::List(vec![0])
    }
}

/// What the caller asks of the backend.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub backend: BackendChoice,
    pub route: RouteChoice,
    /// The GPU(s).
    pub gpu: GpuChoice,
    /// `--async`: the library's stream API, which only the library route has.
    pub async_io: bool,
    /// Start the library's own statistics (see `Config::library_stats`).
    pub library_stats: bool,
}

/// No backend could be brought up as asked (fatal for the run).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoBackend(pub String);

/// Files in flight smaller than this bounce through the slots' windows where `auto` chose the
/// library route. On the library route every file is copied in turn, one at a time on the
/// caller's thread, each registered with the library; a tree of small files then runs on
/// one thread (bench/results/HISTORY.md, "Small files on the library route"). Small
/// requests gain little from the library's DMA: KvikIO, NVIDIA's own cuFile wrapper, sends
/// reads and writes under 1 MiB to POSIX by default for that reason.
pub const LIBRARY_FROM: u64 = 1 << 20;

/// The size below which files in flight bounce on a library route that `auto` chose
/// ([`LIBRARY_FROM`]); None where the library route was asked for (`--route library`,
/// `--async`), and every file takes it.
pub fn bounce_below(request: &Request, library_route: bool) -> Option<u64> {
    let chosen = request.route == RouteChoice::Auto && !request.async_io;
    (library_route && chosen).then_some(LIBRARY_FROM)
}

/// Whether registered files take the library route on `flavor`, and why: every choice of
/// route is made here.
pub fn resolve_route(flavor: Flavor, request: &Request) -> (bool, &'static str) {
    match request.route {
        RouteChoice::Library => (true, "as asked"),
        RouteChoice::Bounce => (false, "as asked"),
        RouteChoice::Auto if request.async_io => (true, "--async needs the library's streams"),
        // hipFile decides per request between its DMA fastpath and its own fallback.
        RouteChoice::Auto if flavor == Flavor::HipFile => (true, "hipFile picks DMA or fallback"),
        RouteChoice::Auto if gpu::nvidia_fs_present() => (true, "nvidia-fs present"),
        RouteChoice::Auto => (false, "cuFile in compatibility mode: no nvidia-fs"),
    }
}
