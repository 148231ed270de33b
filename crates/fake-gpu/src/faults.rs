//! The fault plan: `AISCP_FAKE_GPU_FAULTS` parsed once into rules, and the matching that
//! decides whether a given call fails.
//!
//! A malformed plan is a bug in the test that set it, so parsing reports the offending rule
//! and the process aborts (see [`FaultPlan::from_env`]) instead of running with no faults.

use std::sync::atomic::{AtomicBool, Ordering};

/// What an injected read/write fault does to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoFault {
    /// Return -1 with this errno.
    Errno(i32),
    /// Return -CODE, CODE a hipFile error (5001..=5039).
    HipFile(i32),
    /// Return -CODE with errno 0, CODE a `hipError_t`.
    HipErr(i32),
    /// Move at most this many bytes (the call then proceeds normally).
    Short(u64),
    /// Sleep this many milliseconds inside the call, then proceed normally: a call that
    /// blocks, out of reach of the caller's stop flag.
    Stall(u64),
    /// Move the bytes, then flip every bit of the first byte moved as it lands (a read: in
    /// device memory; a write: in the file, device memory left as it was): data damaged in
    /// transit that only a read-back can catch.
    Corrupt,
}

/// Which calls a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// Every call.
    Always,
    /// The Nth call (1-based); with `repeat`, the Nth and every later one.
    Call { n: u64, repeat: bool },
    /// The first read/write whose byte range covers this file offset; with `repeat`, every one.
    Offset { offset: u64, repeat: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    Read,
    Write,
}

impl IoOp {
    pub fn name(self) -> &'static str {
        match self {
            IoOp::Read => "read",
            IoOp::Write => "write",
        }
    }
}

#[derive(Debug)]
pub struct IoRule {
    pub op: IoOp,
    pub selector: Selector,
    pub fault: IoFault,
    /// Set when a fire-once offset rule has fired; makes "fails once" exact across threads.
    fired: AtomicBool,
}

/// A rule that makes a call returning a bare code fail (register, bufregister, driver, malloc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeRule {
    pub selector: Selector,
    pub code: i32,
}

/// The HIP runtime calls a rule can fail besides hipMalloc/hipHostMalloc: the ones a copy's
/// workers make, so that a caller swallowing their errors shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeCall {
    /// hipSetDevice.
    SetDevice,
    /// hipStreamCreateWithFlags.
    StreamCreate,
    /// hipStreamSynchronize.
    StreamSync,
    /// hipMemcpy / hipMemcpyAsync host to device (numbered together, when issued).
    HostToDevice,
    /// hipMemcpy / hipMemcpyAsync device to host (numbered together, when issued).
    DeviceToHost,
}

impl RuntimeCall {
    const ALL: [(&'static str, RuntimeCall); 5] = [
        ("setdevice", RuntimeCall::SetDevice),
        ("streamcreate", RuntimeCall::StreamCreate),
        ("streamsync", RuntimeCall::StreamSync),
        ("htod", RuntimeCall::HostToDevice),
        ("dtoh", RuntimeCall::DeviceToHost),
    ];

    /// Index into the per-call counters.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What a runtime rule does to the call it selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeFault {
    /// Return this `hipError_t`, doing nothing.
    Code(i32),
    /// A copy runs, then every bit of its first byte is flipped in the destination.
    Corrupt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeRule {
    pub call: RuntimeCall,
    pub selector: Selector,
    pub fault: RuntimeFault,
}

/// Every rule from `AISCP_FAKE_GPU_FAULTS`, grouped by the call they affect.
#[derive(Debug, Default)]
pub struct FaultPlan {
    pub io: Vec<IoRule>,
    pub register: Vec<CodeRule>,
    pub bufregister: Vec<CodeRule>,
    pub driver: Vec<CodeRule>,
    /// `malloc>BYTES`: every hipMalloc larger than this fails.
    pub malloc_over: Option<u64>,
    /// `malloc#N=oom` rules (code is always hipErrorOutOfMemory).
    pub malloc_calls: Vec<Selector>,
    /// `hostmalloc#N=oom` rules, the same for hipHostMalloc (pinned host memory).
    pub hostmalloc_calls: Vec<Selector>,
    /// `setdevice`, `streamcreate`, `streamsync`, `htod` and `dtoh` rules.
    pub runtime: Vec<RuntimeRule>,
    /// `compile=fail`: every hiprtcCompileProgram fails (HIPRTC_ERROR_COMPILATION).
    pub compile_fails: bool,
}

/// The errno names a rule may use.
const ERRNO_NAMES: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("ENODEV", libc::ENODEV),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("ESPIPE", libc::ESPIPE),
    ("EROFS", libc::EROFS),
    ("EPIPE", libc::EPIPE),
    ("EOVERFLOW", libc::EOVERFLOW),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("ENOTSUP", libc::ENOTSUP),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("ESTALE", libc::ESTALE),
    ("EDQUOT", libc::EDQUOT),
    ("ECANCELED", libc::ECANCELED),
];

impl FaultPlan {
    /// Reads and parses `AISCP_FAKE_GPU_FAULTS`; on a malformed rule prints one line naming
    /// it to stderr and aborts, because a test that meant to inject a fault must not pass
    /// silently without it.
    pub fn from_env() -> FaultPlan {
        let Some(raw) = std::env::var_os("AISCP_FAKE_GPU_FAULTS") else {
            return FaultPlan::default();
        };
        let text = raw.to_string_lossy();
        match FaultPlan::parse(&text) {
            Ok(plan) => plan,
            Err((rule, why)) => {
                eprintln!("fake-gpu: malformed AISCP_FAKE_GPU_FAULTS rule `{rule}`: {why}");
                std::process::abort();
            }
        }
    }

    /// Parses `;`-separated rules; the error names the rule and what is wrong with it.
    pub fn parse(text: &str) -> Result<FaultPlan, (String, String)> {
        let mut plan = FaultPlan::default();
        for rule in text.split(';').map(str::trim).filter(|r| !r.is_empty()) {
            plan.add(rule).map_err(|why| (rule.to_string(), why))?;
        }
        Ok(plan)
    }

    fn add(&mut self, rule: &str) -> Result<(), String> {
        if let Some(limit) = rule.strip_prefix("malloc>") {
            self.malloc_over = Some(number(limit)?);
            return Ok(());
        }
        let (lhs, rhs) = rule
            .split_once('=')
            .ok_or("expected NAME[SELECTOR]=VALUE or malloc>BYTES")?;
        let name_end = lhs.find(['@', '#']).unwrap_or(lhs.len());
        let (name, selector) = (&lhs[..name_end], selector(&lhs[name_end..])?);
        match name {
            "read" | "write" => {
                let op = if name == "read" {
                    IoOp::Read
                } else {
                    IoOp::Write
                };
                self.io.push(IoRule {
                    op,
                    selector,
                    fault: io_fault(rhs)?,
                    fired: AtomicBool::new(false),
                });
            }
            "register" | "bufregister" | "driver" => {
                if matches!(selector, Selector::Offset { .. }) {
                    return Err(format!("`{name}` takes no @OFFSET selector"));
                }
                let code = hipfile_code(rhs.strip_prefix("hipfile:").unwrap_or(rhs))?;
                let list = match name {
                    "register" => &mut self.register,
                    "bufregister" => &mut self.bufregister,
                    _ => &mut self.driver,
                };
                list.push(CodeRule { selector, code });
            }
            "compile" => {
                if selector != Selector::Always || rhs != "fail" {
                    return Err("use compile=fail".to_owned());
                }
                self.compile_fails = true;
            }
            "malloc" | "hostmalloc" => {
                if !matches!(selector, Selector::Call { .. }) {
                    return Err(format!("use {name}#N=oom or malloc>BYTES"));
                }
                if rhs != "oom" {
                    return Err(format!("{name}#N takes `oom`, not `{rhs}`"));
                }
                if name == "malloc" {
                    self.malloc_calls.push(selector);
                } else {
                    self.hostmalloc_calls.push(selector);
                }
            }
            _ => {
                let Some(&(_, call)) = RuntimeCall::ALL.iter().find(|(n, _)| *n == name) else {
                    return Err(format!("unknown call `{name}`"));
                };
                if matches!(selector, Selector::Offset { .. }) {
                    return Err(format!("`{name}` takes no @OFFSET selector"));
                }
                let copy = matches!(call, RuntimeCall::HostToDevice | RuntimeCall::DeviceToHost);
                let fault = if rhs == "corrupt" {
                    if !copy {
                        return Err(format!("only htod and dtoh take `corrupt`, not `{name}`"));
                    }
                    RuntimeFault::Corrupt
                } else {
                    let code = number(rhs.strip_prefix("hiperr:").unwrap_or(rhs))?;
                    if code == 0 || code > i32::MAX as u64 {
                        return Err(format!("`{rhs}` is not a nonzero hipError_t"));
                    }
                    RuntimeFault::Code(code as i32)
                };
                self.runtime.push(RuntimeRule {
                    call,
                    selector,
                    fault,
                });
            }
        }
        Ok(())
    }

    /// The fault for a read/write, if any rule selects it. `call` is the 1-based call number,
    /// `[offset, offset + len)` the file range the call covers. Fire-once rules are consumed.
    pub fn io_fault(&self, op: IoOp, call: u64, offset: u64, len: u64) -> Option<IoFault> {
        self.io.iter().find_map(|rule| {
            if rule.op != op {
                return None;
            }
            let hit = match rule.selector {
                Selector::Offset { offset: at, repeat } => {
                    let covers = len > 0 && offset <= at && at - offset < len;
                    covers
                        && (repeat
                            || rule
                                .fired
                                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                                .is_ok())
                }
                other => selects_call(other, call),
            };
            hit.then_some(rule.fault)
        })
    }

    /// The hipFile code a register/bufregister/driver call must fail with, if any.
    pub fn code_fault(rules: &[CodeRule], call: u64) -> Option<i32> {
        rules
            .iter()
            .find(|rule| selects_call(rule.selector, call))
            .map(|rule| rule.code)
    }

    /// The fault for the `n`th call of `call`, if any rule selects it.
    pub fn runtime_fault(&self, call: RuntimeCall, n: u64) -> Option<RuntimeFault> {
        self.runtime
            .iter()
            .find(|rule| rule.call == call && selects_call(rule.selector, n))
            .map(|rule| rule.fault)
    }

    /// Whether the `call`th hipHostMalloc fails.
    pub fn hostmalloc_fails(&self, call: u64) -> bool {
        self.hostmalloc_calls.iter().any(|&s| selects_call(s, call))
    }

    /// Whether the `call`th hipMalloc, of `size` bytes, must fail with out-of-memory.
    pub fn malloc_fails(&self, call: u64, size: u64) -> bool {
        self.malloc_over.is_some_and(|limit| size > limit)
            || self.malloc_calls.iter().any(|&s| selects_call(s, call))
    }
}

fn selects_call(selector: Selector, call: u64) -> bool {
    match selector {
        Selector::Always => true,
        Selector::Call { n, repeat } => call == n || (repeat && call > n),
        Selector::Offset { .. } => false,
    }
}

fn selector(text: &str) -> Result<Selector, String> {
    if text.is_empty() {
        return Ok(Selector::Always);
    }
    let (body, repeat) = match text.strip_suffix('*') {
        Some(body) => (body, true),
        None => (text, false),
    };
    if let Some(n) = body.strip_prefix('#') {
        let n = number(n)?;
        if n == 0 {
            return Err("call numbers start at 1".into());
        }
        Ok(Selector::Call { n, repeat })
    } else if let Some(offset) = body.strip_prefix('@') {
        Ok(Selector::Offset {
            offset: number(offset)?,
            repeat,
        })
    } else {
        Err(format!("bad selector `{text}`"))
    }
}

fn io_fault(text: &str) -> Result<IoFault, String> {
    if let Some(bytes) = text.strip_prefix("short:") {
        return Ok(IoFault::Short(number(bytes)?));
    }
    if text == "corrupt" {
        return Ok(IoFault::Corrupt);
    }
    if let Some(ms) = text.strip_prefix("stall:") {
        return Ok(IoFault::Stall(number(ms)?));
    }
    if let Some(code) = text.strip_prefix("hipfile:") {
        return Ok(IoFault::HipFile(hipfile_code(code)?));
    }
    if let Some(code) = text.strip_prefix("hiperr:") {
        let code = number(code)?;
        if code == 0 || code > i32::MAX as u64 {
            return Err(format!("hiperr code `{code}` must be a nonzero hipError_t"));
        }
        return Ok(IoFault::HipErr(code as i32));
    }
    ERRNO_NAMES
        .iter()
        .find(|(name, _)| *name == text)
        .map(|&(_, errno)| IoFault::Errno(errno))
        .ok_or_else(|| {
            format!(
                "`{text}` is not an errno name, hipfile:CODE, hiperr:CODE, short:BYTES, stall:MS or corrupt"
            )
        })
}

fn hipfile_code(text: &str) -> Result<i32, String> {
    let code = number(text)?;
    if (5001..=5039).contains(&code) {
        Ok(code as i32)
    } else {
        Err(format!("`{text}` is not a hipFile error code (5001..5039)"))
    }
}

/// A decimal or `0x` hexadecimal number.
fn number(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("`{text}` is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let plan = FaultPlan::parse(
            "read@4096=EIO; write#2=ENOSPC;read#3*=hipfile:5030;write@0x1000*=hiperr:2;\
             read=short:0;register=5027;register#2=hipfile:5028;bufregister=5023;\
             malloc>1048576;malloc#3=oom;driver=5001;",
        )
        .unwrap();
        assert_eq!(plan.io.len(), 5);
        assert_eq!(
            plan.io[0].selector,
            Selector::Offset {
                offset: 4096,
                repeat: false
            }
        );
        assert_eq!(plan.io[0].fault, IoFault::Errno(libc::EIO));
        assert_eq!(plan.io[2].fault, IoFault::HipFile(5030));
        assert_eq!(plan.io[3].fault, IoFault::HipErr(2));
        assert_eq!(plan.io[4].fault, IoFault::Short(0));
        assert_eq!(plan.register.len(), 2);
        assert_eq!(plan.malloc_over, Some(1 << 20));
        assert_eq!(plan.driver[0].code, 5001);
    }

    #[test]
    fn rejects_malformed_rules_naming_them() {
        for bad in [
            "read",
            "read@x=EIO",
            "read#0=EIO",
            "read@1=EWHAT",
            "read@1=hipfile:42",
            "read@1=hiperr:0",
            "bogus=1",
            "register@5=5027",
            "malloc#1=5",
            "malloc=oom",
            "read%1=EIO",
            "setdevice@4096=101",
            "setdevice#1=corrupt",
            "streamsync#1=0",
            "dtoh#1=EIO",
            "htod#x=1",
        ] {
            let err = FaultPlan::parse(&format!("write#1=EIO;{bad}")).unwrap_err();
            assert_eq!(err.0, bad);
        }
    }

    #[test]
    fn runtime_rules_select_their_call_only() {
        let plan = FaultPlan::parse(
            "setdevice#2=101;streamcreate=hiperr:2;streamsync#3*=1;dtoh#1=corrupt;htod#2=1;\
             write@0=corrupt",
        )
        .unwrap();
        use RuntimeCall::*;
        assert_eq!(plan.runtime_fault(SetDevice, 1), None);
        assert_eq!(
            plan.runtime_fault(SetDevice, 2),
            Some(RuntimeFault::Code(101))
        );
        assert_eq!(plan.runtime_fault(SetDevice, 3), None);
        assert_eq!(
            plan.runtime_fault(StreamCreate, 7),
            Some(RuntimeFault::Code(2))
        );
        assert_eq!(plan.runtime_fault(StreamSync, 2), None);
        assert_eq!(
            plan.runtime_fault(StreamSync, 9),
            Some(RuntimeFault::Code(1))
        );
        assert_eq!(
            plan.runtime_fault(DeviceToHost, 1),
            Some(RuntimeFault::Corrupt)
        );
        assert_eq!(plan.runtime_fault(HostToDevice, 1), None);
        assert_eq!(
            plan.runtime_fault(HostToDevice, 2),
            Some(RuntimeFault::Code(1))
        );
        assert_eq!(plan.io_fault(IoOp::Write, 1, 0, 1), Some(IoFault::Corrupt));
    }

    #[test]
    fn offset_rule_fires_once_unless_repeated() {
        let plan = FaultPlan::parse("read@8192=EIO;write@0*=EIO").unwrap();
        assert_eq!(plan.io_fault(IoOp::Read, 1, 0, 8192), None);
        assert_eq!(plan.io_fault(IoOp::Read, 2, 8192, 0), None);
        assert_eq!(
            plan.io_fault(IoOp::Read, 3, 4096, 4097),
            Some(IoFault::Errno(libc::EIO))
        );
        assert_eq!(plan.io_fault(IoOp::Read, 4, 4096, 8192), None);
        for call in 1..4 {
            assert!(plan.io_fault(IoOp::Write, call, 0, 1).is_some());
        }
    }

    #[test]
    fn call_rules_select_exactly() {
        let plan =
            FaultPlan::parse("write#2=EIO;read#3*=EINTR;malloc#2=oom;hostmalloc#1=oom").unwrap();
        assert!(plan.hostmalloc_fails(1) && !plan.hostmalloc_fails(2));
        assert!(plan.io_fault(IoOp::Write, 1, 0, 1).is_none());
        assert!(plan.io_fault(IoOp::Write, 2, 0, 1).is_some());
        assert!(plan.io_fault(IoOp::Write, 3, 0, 1).is_none());
        assert!(plan.io_fault(IoOp::Read, 2, 0, 1).is_none());
        assert!(plan.io_fault(IoOp::Read, 3, 0, 1).is_some());
        assert!(plan.io_fault(IoOp::Read, 9, 0, 1).is_some());
        assert!(!plan.malloc_fails(1, 1));
        assert!(plan.malloc_fails(2, 1));
        assert!(!plan.malloc_fails(3, 1));
    }
}
