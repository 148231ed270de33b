//! The double's process-wide state: configuration read once from the environment, the
//! bookkeeping of everything registered or allocated, call counters, and the exit report.
//!
//! All bookkeeping sits behind one mutex; callers never hold it across a pread/pwrite, so
//! worker threads doing I/O only contend for the short validation and accounting steps.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::CString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::faults::{FaultPlan, IoOp, RuntimeCall, RuntimeFault};

/// Misuse lines kept in the report; more are counted, not listed, so a runaway loop cannot
/// exhaust memory.
const MAX_MISUSE_LINES: usize = 1000;

pub struct Fake {
    pub faults: FaultPlan,
    /// `AISCP_FAKE_GPU_DEVICES`, default 1.
    pub devices: i32,
    /// Each device's PCI address (hipDeviceGetPCIBusId).
    pub bus_ids: Vec<String>,
    report_path: Option<PathBuf>,
    /// Append-only trace file descriptor (`AISCP_FAKE_GPU_TRACE`), or -1.
    trace_fd: i32,
    pub calls: CallCounters,
    registry: Mutex<Registry>,
    /// `CUDA_DEVICE_MAX_CONNECTIONS` as the runtime found it when first called: the fake
    /// stands in for a runtime in tests, so the setting aiscp makes for one is tested end
    /// to end.
    work_queues: Option<String>,
}

/// Per-process call numbers for the `#N` selectors; counted at entry, refused calls included.
#[derive(Default)]
pub struct CallCounters {
    pub read: AtomicU64,
    pub write: AtomicU64,
    pub register: AtomicU64,
    pub bufregister: AtomicU64,
    pub driver_open: AtomicU64,
    pub malloc: AtomicU64,
    pub hostmalloc: AtomicU64,
    /// One per [`RuntimeCall`], by its index.
    pub runtime: [AtomicU64; 5],
}

impl CallCounters {
    /// Numbers this call of `call` (from 1) and returns the fault a rule puts on it.
    pub fn runtime_fault(&self, plan: &FaultPlan, call: RuntimeCall) -> Option<RuntimeFault> {
        let n = self.runtime[call.index()].fetch_add(1, Ordering::SeqCst) + 1;
        plan.runtime_fault(call, n)
    }

    pub fn io(&self, op: IoOp) -> &AtomicU64 {
        match op {
            IoOp::Read => &self.read,
            IoOp::Write => &self.write,
        }
    }
}

#[derive(Debug)]
pub struct HandleEntry {
    pub fd: i32,
    /// The file behind `fd` at registration (device, inode): at deregistration the fd must
    /// still be open on it, or the caller closed the fd first.
    pub file: (u64, u64),
    /// I/O calls running on this handle; deregistering while nonzero is refused.
    pub in_flight: u32,
}

#[derive(Debug)]
pub struct BufferEntry {
    pub len: usize,
    pub in_flight: u32,
}

/// A queued hipFileReadAsync/WriteAsync, run when its stream is synchronized. The pointers
/// are the caller's, kept as addresses so the queue can live in the shared registry.
#[derive(Debug, Clone, Copy)]
pub struct AsyncOp {
    pub op: IoOp,
    pub fh: usize,
    pub base: usize,
    pub size_p: usize,
    pub file_offset_p: usize,
    pub buffer_offset_p: usize,
    pub bytes_p: usize,
    /// Values captured at enqueue because the stream was registered with a FIXED_* flag.
    pub fixed_size: Option<usize>,
    pub fixed_file_offset: Option<i64>,
    pub fixed_buffer_offset: Option<i64>,
    /// The stream promised 4 KiB-aligned inputs (HIPFILE_STREAM_PAGE_ALIGNED_INPUTS).
    pub page_aligned: bool,
}

#[derive(Debug, Default)]
pub struct StreamEntry {
    /// Flags given to hipFileStreamRegister while registered.
    pub hipfile_flags: Option<u32>,
    pub pending: Vec<Queued>,
}

/// What a stream holds until it is synchronized.
#[derive(Debug, Clone, Copy)]
pub enum Queued {
    File(AsyncOp),
    /// hipMemcpyAsync: `size` bytes from address `src` to `dst` (checked at enqueue).
    Copy {
        dst: usize,
        src: usize,
        size: usize,
        kind: i32,
        /// A `corrupt` rule selected it when issued: flip its first byte once copied.
        corrupt: bool,
    },
    /// hipModuleLaunchKernel of a digest kernel (see `kernels`).
    Kernel(crate::launch::Launch),
}

#[derive(Debug, Default)]
pub struct Stats {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub htod_bytes: u64,
    pub dtoh_bytes: u64,
    pub mallocs: u64,
    pub max_alloc: u64,
    pub handles: u64,
    /// Threads (kernel thread ids) that made a device current with hipSetDevice: shows
    /// whether a caller's workers are reused across files or made anew for each.
    pub device_threads: HashSet<libc::pid_t>,
}

#[derive(Debug)]
pub struct Registry {
    next_id: usize,
    /// hipFile's reference count (explicit and implicit opens).
    pub driver_refs: i64,
    /// hipFileDriverOpen calls minus hipFileDriverClose calls.
    pub explicit_opens: i64,
    pub handles: HashMap<usize, HandleEntry>,
    pub buffers: HashMap<usize, BufferEntry>,
    /// Device allocations: base address -> length.
    pub device_allocs: BTreeMap<usize, usize>,
    /// Pinned host allocations: base address -> length.
    pub host_allocs: BTreeMap<usize, usize>,
    /// Host ranges pinned by hipHostRegister: base -> length.
    pub host_registrations: BTreeMap<usize, usize>,
    /// Created streams; the null (default) stream is key 0 and always present.
    pub streams: HashMap<usize, StreamEntry>,
    misuse: Vec<String>,
    misuse_dropped: u64,
    pub stats: Stats,
    /// What hipFileGetStatsL1/L2/L3 report.
    pub lib_stats: crate::lib_stats::LibStats,
    /// Which device each allocation is on, and what each device moved.
    pub devices: crate::device_use::DeviceUse,
}

impl Registry {
    fn new() -> Registry {
        Registry {
            next_id: 0,
            driver_refs: 0,
            explicit_opens: 0,
            handles: HashMap::new(),
            buffers: HashMap::new(),
            device_allocs: BTreeMap::new(),
            host_allocs: BTreeMap::new(),
            host_registrations: BTreeMap::new(),
            streams: HashMap::from([(0, StreamEntry::default())]),
            misuse: Vec::new(),
            misuse_dropped: 0,
            stats: Stats::default(),
            lib_stats: Default::default(),
            devices: Default::default(),
        }
    }

    /// A fresh opaque value for a handle or stream. Handles and streams share the sequence
    /// and values are never reused, so a stale or mixed-up pointer is always detected.
    pub fn new_id(&mut self) -> usize {
        self.next_id += 1;
        0x0fa6_0000_0000 + self.next_id * 0x10
    }

    pub fn misuse(&mut self, line: String) {
        if self.misuse.len() < MAX_MISUSE_LINES {
            self.misuse.push(line);
        } else {
            self.misuse_dropped += 1;
        }
    }

    /// The device allocation `[base, base + len)` that holds `[addr, addr + size)`, if any.
    pub fn device_alloc_holding(&self, addr: usize, size: usize) -> Option<(usize, usize)> {
        alloc_holding(&self.device_allocs, addr, size)
    }

    /// The pinned host range (allocated or registered) that holds `[addr, addr + size)`.
    pub fn host_alloc_holding(&self, addr: usize, size: usize) -> Option<(usize, usize)> {
        alloc_holding(&self.host_allocs, addr, size)
            .or_else(|| alloc_holding(&self.host_registrations, addr, size))
    }

    /// Opens the driver implicitly (the first registration does so when the count is 0).
    /// Returns the hipFile error to report if opening fails.
    pub fn implicit_open(&mut self, fake: &Fake) -> Result<(), (i32, i32)> {
        if self.driver_refs == 0 {
            fake.driver_open_fault()?;
            self.driver_refs = 1;
        }
        Ok(())
    }

    /// The report text; `reads`/`writes` are the call counters (every hipFileRead/Write,
    /// async ops, refused and faulted calls included), kept by [`CallCounters`].
    fn report(&self, reads: u64, writes: u64) -> String {
        let mut out = String::new();
        self.report_leaks(&mut out);
        for line in &self.misuse {
            let _ = writeln!(out, "misuse: {line}");
        }
        if self.misuse_dropped > 0 {
            let _ = writeln!(
                out,
                "misuse: {} more misuse lines not listed",
                self.misuse_dropped
            );
        }
        let _ = writeln!(out, "{}", self.devices.report_line(fake().devices));
        let s = &self.stats;
        let _ = writeln!(
            out,
            "stats: reads={} writes={} read_bytes={} write_bytes={} htod_bytes={} dtoh_bytes={} \
             mallocs={} max_alloc={} handles={} device_threads={}",
            reads,
            writes,
            s.read_bytes,
            s.write_bytes,
            s.htod_bytes,
            s.dtoh_bytes,
            s.mallocs,
            s.max_alloc,
            s.handles,
            s.device_threads.len()
        );
        out
    }

    /// The report's leak lines: what is still registered, allocated or open, in order.
    fn report_leaks(&self, out: &mut String) {
        let mut handles: Vec<_> = self.handles.iter().collect();
        handles.sort_by_key(|(id, _)| **id);
        for (id, h) in handles {
            let _ = writeln!(
                out,
                "leak: file handle {id:#x} (fd {}) still registered",
                h.fd
            );
        }
        let mut buffers: Vec<_> = self.buffers.iter().collect();
        buffers.sort_by_key(|(base, _)| **base);
        for (base, b) in buffers {
            let _ = writeln!(
                out,
                "leak: buffer {base:#x} ({} bytes) still registered",
                b.len
            );
        }
        for (base, len) in &self.device_allocs {
            let _ = writeln!(
                out,
                "leak: device allocation {base:#x} ({len} bytes) not freed"
            );
        }
        for (base, len) in &self.host_allocs {
            let _ = writeln!(
                out,
                "leak: pinned host allocation {base:#x} ({len} bytes) not freed"
            );
        }
        for (base, len) in &self.host_registrations {
            let _ = writeln!(
                out,
                "leak: pinned host range {base:#x} ({len} bytes) not unregistered"
            );
        }
        let mut streams: Vec<_> = self.streams.iter().filter(|(id, _)| **id != 0).collect();
        streams.sort_by_key(|(id, _)| **id);
        for (id, s) in &streams {
            let _ = writeln!(out, "leak: stream {id:#x} not destroyed");
            if s.hipfile_flags.is_some() {
                let _ = writeln!(out, "leak: stream {id:#x} still registered with hipFile");
            }
        }
        if let Some(default) = self.streams.get(&0) {
            if default.hipfile_flags.is_some() {
                let _ = writeln!(out, "leak: null stream still registered with hipFile");
            }
        }
        if self.explicit_opens > 0 {
            let _ = writeln!(out, "leak: driver open count {}", self.explicit_opens);
        }
    }
}

fn alloc_holding(
    allocs: &BTreeMap<usize, usize>,
    addr: usize,
    size: usize,
) -> Option<(usize, usize)> {
    let (&base, &len) = allocs.range(..=addr).next_back()?;
    let end = addr.checked_add(size)?;
    (addr < base + len.max(1) && end <= base + len).then_some((base, len))
}

static FAKE: OnceLock<Fake> = OnceLock::new();

/// The state, created on first use of any exported symbol. Creating it reads the
/// environment once and registers the exit report.
pub fn fake() -> &'static Fake {
    FAKE.get_or_init(|| {
        let fake = Fake::from_env();
        stay_loaded();
        // SAFETY: `write_report_at_exit` is a plain extern "C" fn with no arguments.
        unsafe { libc::atexit(write_report_at_exit) };
        fake
    })
}

/// Keeps this library mapped until the process exits, whoever closes it: the exit report
/// is written by an atexit handler in it, and a caller that dlclose()s it first (aiscp
/// does when its engine is dropped) would otherwise leave that handler pointing at unmapped
/// code (SIGSEGV at exit, and no report).
fn stay_loaded() {
    // SAFETY: a zeroed Dl_info is a valid out-parameter for dladdr.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = write_report_at_exit as *const libc::c_void;
    // SAFETY: `here` is an address in this library; `info` is a valid out-parameter.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return;
    }
    // SAFETY: RTLD_NOLOAD only looks this already-loaded library up, and RTLD_NODELETE
    // promotes it to stay mapped; the handle is kept (never closed) on purpose.
    unsafe {
        libc::dlopen(
            info.dli_fname,
            libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
        )
    };
}

extern "C" fn write_report_at_exit() {
    if let Some(fake) = FAKE.get() {
        fake.write_report();
    }
}

impl Fake {
    fn from_env() -> Fake {
        let devices = match std::env::var("AISCP_FAKE_GPU_DEVICES") {
            Err(_) => 1,
            Ok(text) => match text.trim().parse::<i32>() {
                Ok(n) if n >= 0 => n,
                _ => {
                    eprintln!("fake-gpu: malformed AISCP_FAKE_GPU_DEVICES `{text}`: expected a count >= 0");
                    std::process::abort();
                }
            },
        };
        let trace_fd = std::env::var_os("AISCP_FAKE_GPU_TRACE")
            .and_then(|path| CString::new(path.into_encoded_bytes()).ok())
            .map(|path| {
                // SAFETY: `path` is a valid NUL-terminated string.
                unsafe {
                    libc::open(
                        path.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
                        0o644,
                    )
                }
            })
            .unwrap_or(-1);
        Fake {
            faults: FaultPlan::from_env(),
            bus_ids: crate::device_use::bus_ids_from_env(devices),
            devices,
            report_path: std::env::var_os("AISCP_FAKE_GPU_REPORT").map(PathBuf::from),
            trace_fd,
            calls: CallCounters::default(),
            registry: Mutex::new(Registry::new()),
            work_queues: std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok(),
        }
    }

    /// The registry lock. A panic while holding it cannot leave the bookkeeping half-updated
    /// in a way that matters more than the panic itself, so poisoning is ignored.
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The (hipFile error, hipError_t) pair an opening of the driver fails with, if any.
    pub fn driver_open_fault(&self) -> Result<(), (i32, i32)> {
        let call = self.calls.driver_open.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(code) = FaultPlan::code_fault(&self.faults.driver, call) {
            return Err((code, 0));
        }
        if self.devices == 0 {
            return Err((5011, crate::messages::HIP_ERROR_NO_DEVICE));
        }
        Ok(())
    }

    /// Appends one line to the trace file, if tracing is on.
    pub fn trace(&self, line: impl FnOnce() -> String) {
        if self.trace_fd < 0 {
            return;
        }
        let mut text = line();
        text.push('\n');
        // One write per line: O_APPEND keeps lines from concurrent threads whole.
        // SAFETY: the buffer is valid for its length.
        unsafe { libc::write(self.trace_fd, text.as_ptr().cast(), text.len()) };
    }

    fn write_report(&self) {
        let Some(path) = &self.report_path else {
            return;
        };
        let env = match &self.work_queues {
            Some(value) => format!("runtime env: CUDA_DEVICE_MAX_CONNECTIONS={value}\n"),
            None => "runtime env: CUDA_DEVICE_MAX_CONNECTIONS unset\n".to_owned(),
        };
        let text = env
            + &self.registry().report(
                self.calls.read.load(Ordering::SeqCst),
                self.calls.write.load(Ordering::SeqCst),
            );
        if let Err(e) = std::fs::write(path, text) {
            eprintln!(
                "fake-gpu: cannot write report {}: {e}",
                path.to_string_lossy()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_lookup_respects_bounds() {
        let allocs = BTreeMap::from([(4096, 8192), (65536, 4096)]);
        assert_eq!(alloc_holding(&allocs, 4096, 8192), Some((4096, 8192)));
        assert_eq!(alloc_holding(&allocs, 8192, 4096), Some((4096, 8192)));
        assert_eq!(alloc_holding(&allocs, 8192, 4097), None);
        assert_eq!(alloc_holding(&allocs, 12288, 0), None);
        assert_eq!(alloc_holding(&allocs, 4095, 1), None);
        assert_eq!(alloc_holding(&allocs, 65536 + 4095, 1), Some((65536, 4096)));
        assert_eq!(alloc_holding(&allocs, usize::MAX, 2), None);
    }
}
