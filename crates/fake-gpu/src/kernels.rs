//! Run-time compilation and kernel launches (hiprtc.h and hip_runtime_api.h signatures):
//! the fake "compiles" a source by listing the `extern "C" __global__` kernels it defines,
//! and "runs" aiscp's digest kernels by name with a CPU implementation of its own (the
//! blake3 and crc-fast crates), on the fake device memory, when their stream is
//! synchronized. So the plumbing (compile, load, look up, argument passing, launch geometry,
//! stream order, the fall back when compilation fails) is tested end to end; the kernels'
//! own code is proven elsewhere (g++ on the CPU, and the GPU run).
//!
//! `compile=fail` in `AISCP_FAKE_GPU_FAULTS` makes every hiprtcCompileProgram fail with
//! HIPRTC_ERROR_COMPILATION and a log saying so; `compile=slow:MS` makes it take that long.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

use blake3::hazmat::{merge_subtrees_non_root, ChainingValue, HasherExt, Mode};
use crc_fast::CrcAlgorithm;

use crate::faults::CompileFault;
use crate::launch::{KernelName, Launch};
use crate::state::{fake, Queued};

/// `hipStream_t`.
type HipStream = *mut c_void;

const HIPRTC_SUCCESS: c_int = 0;
const HIPRTC_ERROR_INVALID_INPUT: c_int = 3;
const HIPRTC_ERROR_INVALID_PROGRAM: c_int = 4;
const HIPRTC_ERROR_COMPILATION: c_int = 6;
const HIP_SUCCESS: c_int = 0;
const HIP_ERROR_INVALID_VALUE: c_int = 1;
const HIP_ERROR_INVALID_IMAGE: c_int = 200;
const HIP_ERROR_NO_BINARY_FOR_GPU: c_int = 209;
const HIP_ERROR_INVALID_HANDLE: c_int = 400;
const HIP_ERROR_NOT_FOUND: c_int = 500;

/// The image a fake compile produces: this line, the target line, then one kernel name
/// per line, then NUL.
const MAGIC: &str = "fake-gpu code object\n";
/// How the image names the architecture it was compiled for.
const TARGET: &str = "target ";

struct Program {
    source: String,
    log: String,
    code: Vec<u8>,
}

#[no_mangle]
pub unsafe extern "C" fn hiprtcCreateProgram(
    prog: *mut *mut c_void,
    src: *const c_char,
    _name: *const c_char,
    num_headers: c_int,
    _headers: *const *const c_char,
    _include_names: *const *const c_char,
) -> c_int {
    if prog.is_null() || src.is_null() || num_headers < 0 {
        return HIPRTC_ERROR_INVALID_INPUT;
    }
    let source = CStr::from_ptr(src).to_string_lossy().into_owned();
    let program = Box::new(Program {
        source,
        log: String::new(),
        code: Vec::new(),
    });
    *prog = Box::into_raw(program).cast();
    HIPRTC_SUCCESS
}

/// The names of the `extern "C" __global__` functions `source` defines.
fn kernel_names(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("extern \"C\" __global__ void ") {
        rest = &rest[at + "extern \"C\" __global__ void ".len()..];
        let end = rest.find('(').unwrap_or(0);
        names.push(rest[..end].trim().to_owned());
    }
    names
}

/// The architecture `--gpu-architecture=ARCH` among a compile's options names, if any.
unsafe fn target_of(num_options: c_int, options: *const *const c_char) -> Option<String> {
    if options.is_null() {
        return None;
    }
    (0..num_options.max(0) as usize).find_map(|i| {
        let option = CStr::from_ptr(*options.add(i)).to_string_lossy();
        option
            .strip_prefix("--gpu-architecture=")
            .map(str::to_owned)
    })
}

#[no_mangle]
pub unsafe extern "C" fn hiprtcCompileProgram(
    prog: *mut c_void,
    num_options: c_int,
    options: *const *const c_char,
) -> c_int {
    let Some(program) = prog.cast::<Program>().as_mut() else {
        return HIPRTC_ERROR_INVALID_PROGRAM;
    };
    match fake().faults.compile {
        Some(CompileFault::Fail) => {
            program.log =
                "fake-gpu: compilation failed (compile=fail in AISCP_FAKE_GPU_FAULTS)".into();
            return HIPRTC_ERROR_COMPILATION;
        }
        Some(CompileFault::Slow(took)) => std::thread::sleep(took),
        None => {}
    }
    let names = kernel_names(&program.source);
    if names.is_empty() {
        program.log = "fake-gpu: the source defines no extern \"C\" __global__ kernel".into();
        return HIPRTC_ERROR_COMPILATION;
    }
    // Compiled for the device's own architecture unless told, as hiprtc does.
    let target = target_of(num_options, options).unwrap_or_else(crate::topology::arch);
    let mut code = MAGIC.as_bytes().to_vec();
    code.extend_from_slice(format!("{TARGET}{target}\n").as_bytes());
    for name in names {
        code.extend_from_slice(name.as_bytes());
        code.push(b'\n');
    }
    code.push(0);
    program.code = code;
    HIPRTC_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hiprtcDestroyProgram(prog: *mut *mut c_void) -> c_int {
    if prog.is_null() || (*prog).is_null() {
        return HIPRTC_ERROR_INVALID_PROGRAM;
    }
    drop(Box::from_raw((*prog).cast::<Program>()));
    *prog = std::ptr::null_mut();
    HIPRTC_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hiprtcGetProgramLogSize(prog: *mut c_void, size: *mut usize) -> c_int {
    match (prog.cast::<Program>().as_ref(), size.is_null()) {
        (Some(p), false) => {
            *size = p.log.len() + 1;
            HIPRTC_SUCCESS
        }
        _ => HIPRTC_ERROR_INVALID_INPUT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn hiprtcGetProgramLog(prog: *mut c_void, log: *mut c_char) -> c_int {
    match (prog.cast::<Program>().as_ref(), log.is_null()) {
        (Some(p), false) => {
            std::ptr::copy_nonoverlapping(p.log.as_ptr(), log.cast(), p.log.len());
            *log.add(p.log.len()) = 0;
            HIPRTC_SUCCESS
        }
        _ => HIPRTC_ERROR_INVALID_INPUT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn hiprtcGetCodeSize(prog: *mut c_void, size: *mut usize) -> c_int {
    match (prog.cast::<Program>().as_ref(), size.is_null()) {
        (Some(p), false) if !p.code.is_empty() => {
            *size = p.code.len();
            HIPRTC_SUCCESS
        }
        _ => HIPRTC_ERROR_INVALID_INPUT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn hiprtcGetCode(prog: *mut c_void, code: *mut c_char) -> c_int {
    match (prog.cast::<Program>().as_ref(), code.is_null()) {
        (Some(p), false) if !p.code.is_empty() => {
            std::ptr::copy_nonoverlapping(p.code.as_ptr(), code.cast(), p.code.len());
            HIPRTC_SUCCESS
        }
        _ => HIPRTC_ERROR_INVALID_INPUT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn hiprtcGetErrorString(result: c_int) -> *const c_char {
    let text: &'static CStr = match result {
        HIPRTC_SUCCESS => c"HIPRTC_SUCCESS",
        HIPRTC_ERROR_INVALID_INPUT => c"HIPRTC_ERROR_INVALID_INPUT",
        HIPRTC_ERROR_INVALID_PROGRAM => c"HIPRTC_ERROR_INVALID_PROGRAM",
        HIPRTC_ERROR_COMPILATION => c"HIPRTC_ERROR_COMPILATION",
        _ => c"HIPRTC_ERROR_INTERNAL_ERROR",
    };
    text.as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn hiprtcVersion(major: *mut c_int, minor: *mut c_int) -> c_int {
    if major.is_null() || minor.is_null() {
        return HIPRTC_ERROR_INVALID_INPUT;
    }
    (*major, *minor) = (6, 4);
    HIPRTC_SUCCESS
}

struct Module {
    names: Vec<String>,
}

#[no_mangle]
pub unsafe extern "C" fn hipModuleLoadData(
    module: *mut *mut c_void,
    image: *const c_void,
) -> c_int {
    if module.is_null() || image.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    let text = CStr::from_ptr(image.cast()).to_string_lossy();
    let Some(list) = text.strip_prefix(MAGIC) else {
        return HIP_ERROR_INVALID_IMAGE;
    };
    let mut lines = list.lines();
    // A code object of another architecture, as a GPU refuses one.
    match lines.next().and_then(|l| l.strip_prefix(TARGET)) {
        Some(target) if target == crate::topology::arch() => {}
        Some(_) => return HIP_ERROR_NO_BINARY_FOR_GPU,
        None => return HIP_ERROR_INVALID_IMAGE,
    }
    let names = lines.map(str::to_owned).collect();
    *module = Box::into_raw(Box::new(Module { names })).cast();
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipModuleUnload(module: *mut c_void) -> c_int {
    if module.is_null() {
        return HIP_ERROR_INVALID_HANDLE;
    }
    drop(Box::from_raw(module.cast::<Module>()));
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipModuleGetFunction(
    function: *mut *mut c_void,
    module: *mut c_void,
    name: *const c_char,
) -> c_int {
    let Some(module) = module.cast::<Module>().as_ref() else {
        return HIP_ERROR_INVALID_HANDLE;
    };
    if function.is_null() || name.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    let name = CStr::from_ptr(name).to_string_lossy();
    match KernelName::from_name(&name) {
        Some(kernel) if module.names.iter().any(|n| *n == name) => {
            *function = Box::into_raw(Box::new(kernel)).cast();
            HIP_SUCCESS
        }
        _ => HIP_ERROR_NOT_FOUND,
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipModuleLaunchKernel(
    function: *mut c_void,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    _shared: c_uint,
    stream: HipStream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> c_int {
    let Some(&kernel) = function.cast::<KernelName>().as_ref() else {
        return HIP_ERROR_INVALID_HANDLE;
    };
    let geometry_ok = grid_x > 0
        && block_x > 0
        && block_x <= 1024
        && [grid_y, grid_z, block_y, block_z] == [1; 4];
    if params.is_null() || !extra.is_null() || !geometry_ok {
        fake().registry().misuse(format!(
            "hipModuleLaunchKernel {kernel:?}: grid {grid_x}x{grid_y}x{grid_z}, block \
             {block_x}x{block_y}x{block_z}, params {params:?}, extra {extra:?}"
        ));
        return HIP_ERROR_INVALID_VALUE;
    }
    let mut args = [0u64; 6];
    for (i, &size) in kernel.params().iter().enumerate() {
        let p = *params.add(i);
        args[i] = match size {
            4 => u64::from(p.cast::<u32>().read_unaligned()),
            _ => p.cast::<u64>().read_unaligned(),
        };
    }
    let launch = Launch {
        kernel,
        args,
        threads: u64::from(grid_x) * u64::from(block_x),
        blocks: u64::from(grid_x),
    };
    let mut reg = fake().registry();
    match reg.streams.get_mut(&(stream as usize)) {
        Some(entry) => {
            entry.pending.push(Queued::Kernel(launch));
            HIP_SUCCESS
        }
        None => {
            reg.misuse(format!(
                "hipModuleLaunchKernel on unknown stream {:#x}",
                stream as usize
            ));
            HIP_ERROR_INVALID_HANDLE
        }
    }
}

/// Device memory at `addr` for `len` bytes, checked against the fake's allocations; None
/// (and a misuse line) when a kernel would reach outside them.
unsafe fn device_slice<'a>(kernel: KernelName, addr: u64, len: u64) -> Option<&'a mut [u8]> {
    let mut reg = fake().registry();
    if len == 0 {
        return Some(&mut []);
    }
    if reg
        .device_alloc_holding(addr as usize, len as usize)
        .is_none()
    {
        reg.misuse(format!(
            "kernel {kernel:?} reaches {len} bytes at {addr:#x}, outside device memory"
        ));
        return None;
    }
    Some(std::slice::from_raw_parts_mut(
        addr as *mut u8,
        len as usize,
    ))
}

fn crc_algorithm(kind: u64) -> Option<CrcAlgorithm> {
    match kind {
        0 => Some(CrcAlgorithm::Crc32Iscsi),
        1 => Some(CrcAlgorithm::Crc64Nvme),
        _ => None,
    }
}

/// The non-root chaining value of `cvs` (left-balanced, as BLAKE3 builds a subtree).
fn reduce(cvs: &[ChainingValue]) -> ChainingValue {
    if cvs.len() == 1 {
        return cvs[0];
    }
    let left = cvs.len().next_power_of_two() / 2;
    merge_subtrees_non_root(&reduce(&cvs[..left]), &reduce(&cvs[left..]), Mode::Hash)
}

/// Runs a queued launch now (its stream is being synchronized). A kernel whose arguments
/// reach outside device memory does nothing and leaves a misuse line, as a faulting GPU
/// kernel would leave its outputs unwritten.
pub unsafe fn run(launch: Launch) {
    match launch.kernel {
        KernelName::Blake3Chunks => blake3_chunks(&launch),
        KernelName::Blake3Subtrees => blake3_subtrees(&launch),
        KernelName::CrcBlocks => crc_blocks(&launch),
        KernelName::CrcCombine => crc_combine(&launch),
    }
}

/// What a thread with index >= the grid's never computes stays unwritten here too: of `n`
/// items, those the launch's threads cover.
fn covered(launch: &Launch, n: u64) -> u64 {
    n.min(launch.threads)
}

/// Each 1 KiB chunk of the data's chaining value, numbered from `first`.
unsafe fn blake3_chunks(launch: &Launch) {
    let [data, len, first, cvs, ..] = launch.args;
    let kernel = launch.kernel;
    let chunks = len.div_ceil(1024).max(1);
    let (Some(data), Some(out)) = (
        device_slice(kernel, data, len),
        device_slice(kernel, cvs, chunks * 32),
    ) else {
        return;
    };
    for i in 0..covered(launch, chunks) {
        let at = (i * 1024) as usize;
        let bytes = &data[at..(at + 1024).min(data.len())];
        if bytes.is_empty() {
            // hazmat refuses an empty subtree; no slice the engine hashes is empty.
            continue;
        }
        let mut hasher = blake3::Hasher::new();
        hasher.set_input_offset((first + i) * 1024);
        hasher.update(bytes);
        out[i as usize * 32..][..32].copy_from_slice(&hasher.finalize_non_root());
    }
}

/// One block per subtree: the chaining values its table entry names, reduced to one.
unsafe fn blake3_subtrees(launch: &Launch) {
    let [cvs, nodes, out, ..] = launch.args;
    let kernel = launch.kernel;
    let Some(table) = device_slice(kernel, nodes, launch.blocks * 16) else {
        return;
    };
    let table: Vec<u64> = table
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .collect();
    let Some(out) = device_slice(kernel, out, launch.blocks * 32) else {
        return;
    };
    for b in 0..launch.blocks as usize {
        let (first, count) = (table[2 * b], table[2 * b + 1]);
        let Some(node) = device_slice(kernel, cvs + first * 32, count * 32) else {
            return;
        };
        let node: Vec<ChainingValue> = node
            .chunks_exact(32)
            .map(|c| c.try_into().unwrap())
            .collect();
        out[b * 32..][..32].copy_from_slice(&reduce(&node));
    }
}

/// The CRC of each `block` bytes of the data.
unsafe fn crc_blocks(launch: &Launch) {
    let [data, len, block, kind, crcs, _] = launch.args;
    let kernel = launch.kernel;
    let (Some(algorithm), true) = (crc_algorithm(kind), block > 0 && block % 4 == 0) else {
        fake()
            .registry()
            .misuse(format!("kernel {kernel:?}: kind {kind}, block {block}"));
        return;
    };
    let count = len.div_ceil(block);
    let (Some(data), Some(out)) = (
        device_slice(kernel, data, len),
        device_slice(kernel, crcs, count * 8),
    ) else {
        return;
    };
    for i in 0..covered(launch, count) as usize {
        let at = i * block as usize;
        let bytes = &data[at..(at + block as usize).min(data.len())];
        out[i * 8..][..8].copy_from_slice(&crc_fast::checksum(algorithm, bytes).to_le_bytes());
    }
}

/// The blocks' CRCs combined, in order, into the CRC of all `len` bytes.
unsafe fn crc_combine(launch: &Launch) {
    let [crcs, count, len, block, kind, out] = launch.args;
    let kernel = launch.kernel;
    let Some(algorithm) = crc_algorithm(kind) else {
        fake()
            .registry()
            .misuse(format!("kernel {kernel:?}: kind {kind}"));
        return;
    };
    let (Some(crcs), Some(out)) = (
        device_slice(kernel, crcs, count * 8),
        device_slice(kernel, out, 8),
    ) else {
        return;
    };
    let mut acc = 0u64;
    for i in 0..count {
        let crc = u64::from_le_bytes(crcs[i as usize * 8..][..8].try_into().unwrap());
        let piece = (len - i * block).min(block);
        acc = match i {
            0 => crc,
            _ => crc_fast::checksum_combine(algorithm, acc, crc, piece),
        };
    }
    out.copy_from_slice(&acc.to_le_bytes());
}
