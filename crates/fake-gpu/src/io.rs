//! The one place bytes move between a file and "device" memory: hipFileRead/Write and the
//! async ops (when their stream is synchronized) all end in [`transfer`].

use std::sync::atomic::Ordering;

use crate::faults::{IoFault, IoOp};
use crate::state::{fake, AsyncOp, Registry};

/// Linux MAX_RW_COUNT: one call moves at most this many bytes, like the real library.
pub const MAX_IO_BYTES: usize = 0x7fff_f000;
/// The alignment the real fastpath demands of O_DIRECT I/O.
pub const DIRECT_IO_ALIGN: u64 = 4096;

pub const HIPFILE_INVALID_VALUE: i32 = 5022;
pub const HIPFILE_POINTER_RANGE_ERROR: i32 = 5014;
pub const HIPFILE_MEMORY_NOT_REGISTERED: i32 = 5024;
pub const HIPFILE_HANDLE_NOT_REGISTERED: i32 = 5027;

/// One read or write as the caller asked for it.
#[derive(Debug, Clone, Copy)]
pub struct IoRequest {
    pub op: IoOp,
    pub fh: usize,
    pub base: usize,
    pub size: usize,
    pub file_offset: i64,
    pub buffer_offset: i64,
}

/// Sets the calling thread's errno.
pub fn set_errno(value: i32) {
    // SAFETY: __errno_location always returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Performs `req` with the real library's rules and the fault plan, returning what
/// hipFileRead/Write return: bytes moved, -1 with errno set, or a negated error code.
pub fn transfer(req: IoRequest) -> isize {
    let fake = fake();
    let call = fake.calls.io(req.op).fetch_add(1, Ordering::SeqCst) + 1;
    let (fd, result, direct) = match begin(req, call) {
        Ok(plan) => (plan.fd, finish(req, &plan), Some(plan.direct)),
        Err((fd, result)) => (fd, result, None),
    };
    // Counting takes the registry lock, which can leave EAGAIN in errno: keep the call's.
    let call_errno = errno();
    count(req, direct, result);
    set_errno(call_errno);
    fake.trace(|| {
        format!(
            "{} fd={fd} size={} file_off={} buf_off={} result={result}",
            req.op.name(),
            req.size,
            req.file_offset,
            req.buffer_offset
        )
    });
    result
}

/// Counts a call for the statistics calls, on the device that holds its buffer.
fn count(req: IoRequest, direct: Option<bool>, result: isize) {
    let mut reg = fake().registry();
    let device = reg
        .device_alloc_holding(req.base, 1)
        .and_then(|(base, _)| reg.devices.alloc_device.get(&base).copied());
    reg.lib_stats.count(req.op, device, direct, result);
}

/// A validated call, ready to move its bytes.
struct Planned {
    fd: i32,
    /// Host address to move bytes at.
    target: usize,
    /// How many bytes to move.
    len: usize,
    /// The most the call reports moving: a `short:BYTES` fault whose BYTES an O_DIRECT fd
    /// could not take moves an aligned amount and reports only BYTES of it, as the real
    /// library (which never issues a misaligned O_DIRECT call) would.
    report_at_most: usize,
    /// A `corrupt` fault: the first byte moved arrives with every bit flipped.
    corrupt: bool,
    /// The descriptor is O_DIRECT: the real library's fast path (else its POSIX fallback).
    direct: bool,
}

/// Validates and accounts for a call under the lock. On success returns the plan, with the
/// handle and buffer marked in flight; otherwise the fd (or -1) and the call's result.
fn begin(req: IoRequest, call: u64) -> Result<Planned, (i32, isize)> {
    let fake = fake();
    let mut reg = fake.registry();
    let name = req.op.name();
    let (fd, target) = checked_target(&mut reg, req)?;
    // SAFETY: fcntl(F_GETFL) only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    let direct = flags != -1 && flags & libc::O_DIRECT != 0;
    if direct && !aligned_for_direct(req, target) {
        reg.misuse(format!(
            "{name} on O_DIRECT fd {fd} not 4096-aligned: file_offset {} size {} buffer address {target:#x}",
            req.file_offset, req.size
        ));
        set_errno(libc::EINVAL);
        return Err((fd, -1));
    }
    let len = req.size.min(MAX_IO_BYTES);
    let fault = fake
        .faults
        .io_fault(req.op, call, req.file_offset as u64, len as u64);
    let moved = faulted(fault, len, direct).map_err(|result| (fd, result))?;
    if let Some(stall) = moved.stall {
        // Without the registry lock held, so other calls go on meanwhile.
        drop(reg);
        std::thread::sleep(stall);
        reg = fake.registry();
    }
    if let Some(h) = reg.handles.get_mut(&req.fh) {
        h.in_flight += 1;
    }
    if let Some(b) = reg.buffers.get_mut(&req.base) {
        b.in_flight += 1;
    }
    crate::topology::used(&mut reg, name, target, moved.len);
    Ok(Planned {
        fd,
        target,
        len: moved.len,
        report_at_most: moved.report_at_most,
        corrupt: moved.corrupt,
        direct,
    })
}

/// The call's registered handle and buffer, its offsets and its size checked against them,
/// as the real library checks them. Returns the fd and the host address to move bytes at;
/// otherwise the fd (or -1) and the call's result, with a misuse line.
fn checked_target(reg: &mut Registry, req: IoRequest) -> Result<(i32, usize), (i32, isize)> {
    let name = req.op.name();
    let Some(fd) = reg.handles.get(&req.fh).map(|h| h.fd) else {
        reg.misuse(format!("{name} on unregistered file handle {:#x}", req.fh));
        return Err((-1, -(HIPFILE_HANDLE_NOT_REGISTERED as isize)));
    };
    let Some(buf_len) = reg.buffers.get(&req.base).map(|b| b.len) else {
        reg.misuse(format!(
            "{name} (fd {fd}) into unregistered buffer {:#x}",
            req.base
        ));
        return Err((fd, -(HIPFILE_MEMORY_NOT_REGISTERED as isize)));
    };
    if req.file_offset < 0 || req.buffer_offset < 0 {
        reg.misuse(format!(
            "{name} (fd {fd}) with negative offset: file_offset {} buffer_offset {}",
            req.file_offset, req.buffer_offset
        ));
        return Err((fd, -(HIPFILE_INVALID_VALUE as isize)));
    }
    let buffer_offset = req.buffer_offset as u64;
    if buffer_offset.saturating_add(req.size as u64) > buf_len as u64 {
        reg.misuse(format!(
            "{name} (fd {fd}) of {} bytes at buffer offset {buffer_offset} overruns buffer {:#x} of {buf_len} bytes",
            req.size, req.base
        ));
        return Err((fd, -(HIPFILE_POINTER_RANGE_ERROR as isize)));
    }
    Ok((fd, req.base + buffer_offset as usize))
}

/// Whether an O_DIRECT call's offset, size and buffer address are all 4096-aligned.
fn aligned_for_direct(req: IoRequest, target: usize) -> bool {
    (req.file_offset as u64) % DIRECT_IO_ALIGN == 0
        && (req.size as u64) % DIRECT_IO_ALIGN == 0
        && (target as u64) % DIRECT_IO_ALIGN == 0
}

/// What a call of `len` bytes moves once its fault, if any, is applied.
struct Moved {
    len: usize,
    report_at_most: usize,
    corrupt: bool,
    /// A `stall` fault: how long the call waits before moving its bytes.
    stall: Option<std::time::Duration>,
}

/// Applies `fault` to a call of `len` bytes. Returns what the call moves, or the result of
/// a call the fault fails (with errno set as the real library leaves it).
fn faulted(fault: Option<IoFault>, len: usize, direct: bool) -> Result<Moved, isize> {
    let mut moved = Moved {
        len,
        report_at_most: len,
        corrupt: false,
        stall: None,
    };
    match fault {
        None => {}
        Some(IoFault::Short(limit)) => {
            let limit = usize::try_from(limit).unwrap_or(len);
            moved.report_at_most = len.min(limit);
            moved.len = if direct {
                // The request is aligned (checked before), so rounding up stays within it.
                len.min(limit.next_multiple_of(DIRECT_IO_ALIGN as usize))
            } else {
                moved.report_at_most
            };
        }
        Some(IoFault::Errno(e)) => {
            set_errno(e);
            return Err(-1);
        }
        Some(IoFault::Stall(ms)) => moved.stall = Some(std::time::Duration::from_millis(ms)),
        Some(IoFault::Corrupt) => moved.corrupt = true,
        Some(IoFault::HipFile(code)) => return Err(-(code as isize)),
        Some(IoFault::HipErr(code)) => {
            // errno 0 is what tells a HIP error apart from a system error when CODE is 1.
            set_errno(0);
            return Err(-(code as isize));
        }
    }
    Ok(moved)
}

/// Moves the bytes without the lock, then releases the in-flight marks and counts them
/// (stats count what moved, the caller sees at most `report_at_most`).
fn finish(req: IoRequest, plan: &Planned) -> isize {
    let flip = || {
        // SAFETY: the first byte of a non-empty range inside a registered, mapped buffer
        // marked in flight, which the caller does not touch while its call runs.
        unsafe { *(plan.target as *mut u8) ^= 0xff }
    };
    let corrupt = plan.corrupt && plan.len > 0;
    if corrupt && req.op == IoOp::Write {
        flip();
    }
    let result = move_bytes(req.op, plan.fd, plan.target, plan.len, req.file_offset);
    if corrupt && (req.op == IoOp::Write || result > 0) {
        // A write leaves device memory as it found it; a read leaves the damage there.
        flip();
    }
    // Taking the registry lock below may wait on a futex, which leaves EAGAIN in errno:
    // keep the failure's errno and put it back last.
    let failed_with = (result < 0).then(errno);
    let fake = fake();
    let mut reg = fake.registry();
    if let Some(h) = reg.handles.get_mut(&req.fh) {
        h.in_flight -= 1;
    }
    if let Some(b) = reg.buffers.get_mut(&req.base) {
        b.in_flight -= 1;
    }
    if result > 0 {
        match req.op {
            IoOp::Read => reg.stats.read_bytes += result as u64,
            IoOp::Write => reg.stats.write_bytes += result as u64,
        }
    }
    drop(reg);
    if let Some(e) = failed_with {
        set_errno(e);
    }
    result.min(plan.report_at_most as isize)
}

/// pread/pwrite until `len` bytes moved, end of file, or an error. Returns the count, or
/// -1 with errno when nothing moved.
fn move_bytes(op: IoOp, fd: i32, target: usize, len: usize, file_offset: i64) -> isize {
    let mut done = 0usize;
    while done < len {
        let ptr = (target + done) as *mut libc::c_void;
        let off = file_offset + done as i64;
        // SAFETY: [target, target + len) lies inside a registered, mapped buffer that cannot
        // be freed or deregistered while marked in flight.
        let n = unsafe {
            match op {
                IoOp::Read => libc::pread(fd, ptr, len - done, off),
                IoOp::Write => libc::pwrite(fd, ptr, len - done, off),
            }
        };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            if done > 0 {
                break;
            }
            set_errno(e);
            return -1;
        }
        if n == 0 {
            break;
        }
        done += n as usize;
    }
    done as isize
}

/// Runs a queued async op: reads its parameters now (unless the stream fixed them at
/// enqueue), performs it, and stores the result through `bytes_p`.
///
/// # Safety
/// The op's pointers must be valid, as the caller of hipFile*Async promised.
pub unsafe fn run_async(op: AsyncOp) -> isize {
    // SAFETY: promised by the caller of hipFile*Async (checked non-null at enqueue).
    let (size, file_offset, buffer_offset) = unsafe {
        (
            op.fixed_size.unwrap_or(*(op.size_p as *const usize)),
            op.fixed_file_offset
                .unwrap_or(*(op.file_offset_p as *const i64)),
            op.fixed_buffer_offset
                .unwrap_or(*(op.buffer_offset_p as *const i64)),
        )
    };
    let aligned = |v: u64| v % DIRECT_IO_ALIGN == 0;
    let result = if op.page_aligned
        && !(aligned(size as u64) && aligned(file_offset as u64) && aligned(buffer_offset as u64))
    {
        fake().registry().misuse(format!(
            "async {} on a PAGE_ALIGNED_INPUTS stream with unaligned inputs: size {size} file_offset {file_offset} buffer_offset {buffer_offset}",
            op.op.name()
        ));
        -(HIPFILE_INVALID_VALUE as isize)
    } else {
        transfer(IoRequest {
            op: op.op,
            fh: op.fh,
            base: op.base,
            size,
            file_offset,
            buffer_offset,
        })
    };
    // SAFETY: as above.
    unsafe { *(op.bytes_p as *mut isize) = result };
    result
}
