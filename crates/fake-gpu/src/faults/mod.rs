//! The fault plan: `AISCP_FAKE_GPU_FAULTS` parsed once into rules, and the matching that
//! decides whether a given call fails.
//!
//! A malformed plan is a bug in the test that set it, so parsing reports the offending rule
//! and the process aborts (see [`FaultPlan::from_env`]) instead of running with no faults.

use std::sync::atomic::{AtomicBool, Ordering};

mod parse;

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
    /// A copy's call sleeps this many milliseconds, then runs normally: the bounce route's
    /// slow transfer, as `write=stall:MS` is the library route's.
    Stall(u64),
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
    /// `compile=fail` or `compile=slow:MS`: what every hiprtcCompileProgram does.
    pub compile: Option<CompileFault>,
}

/// A `compile` rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompileFault {
    /// Fails (HIPRTC_ERROR_COMPILATION).
    Fail,
    /// Takes this long, then compiles: a real compiler's half second, for runs that end
    /// before their compile does.
    Slow(std::time::Duration),
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
