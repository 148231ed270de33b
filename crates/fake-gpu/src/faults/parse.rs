//! `AISCP_FAKE_GPU_FAULTS`'s text into rules: `NAME[SELECTOR]=VALUE` (or `malloc>BYTES`),
//! each rule kind checked for the selectors and values it takes.

use super::{
    CodeRule, CompileFault, FaultPlan, IoFault, IoOp, IoRule, RuntimeCall, RuntimeFault,
    RuntimeRule, Selector,
};
use std::sync::atomic::AtomicBool;

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
            "read" => self.add_io(IoOp::Read, selector, rhs),
            "write" => self.add_io(IoOp::Write, selector, rhs),
            "register" | "bufregister" | "driver" => self.add_code(name, selector, rhs),
            "compile" => {
                let slow = rhs.strip_prefix("slow:").map(number);
                let rule = match (selector, rhs, slow) {
                    (Selector::Always, "fail", _) => CompileFault::Fail,
                    (Selector::Always, _, Some(Ok(ms))) => {
                        CompileFault::Slow(std::time::Duration::from_millis(ms))
                    }
                    _ => return Err("use compile=fail or compile=slow:MS".to_owned()),
                };
                // As for every rule: the first one listed wins.
                self.compile.get_or_insert(rule);
                Ok(())
            }
            "malloc" | "hostmalloc" => self.add_malloc(name, selector, rhs),
            _ => self.add_runtime(name, selector, rhs),
        }
    }

    /// `read` and `write` rules: `VALUE` an errno name, `short:`, `stall:`, `corrupt`,
    /// `hipfile:` or `hiperr:`.
    fn add_io(&mut self, op: IoOp, selector: Selector, rhs: &str) -> Result<(), String> {
        self.io.push(IoRule {
            op,
            selector,
            fault: io_fault(rhs)?,
            fired: AtomicBool::new(false),
        });
        Ok(())
    }

    /// `register`, `bufregister` and `driver` rules: a hipFile code, by call number.
    fn add_code(&mut self, name: &str, selector: Selector, rhs: &str) -> Result<(), String> {
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
        Ok(())
    }

    /// `malloc#N=oom` and `hostmalloc#N=oom`.
    fn add_malloc(&mut self, name: &str, selector: Selector, rhs: &str) -> Result<(), String> {
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
        Ok(())
    }

    /// The runtime calls' rules (`setdevice`, `streamcreate`, ...): a `hipError_t`, or
    /// `corrupt` for the copies.
    fn add_runtime(&mut self, name: &str, selector: Selector, rhs: &str) -> Result<(), String> {
        let Some(&(_, call)) = RuntimeCall::ALL.iter().find(|(n, _)| *n == name) else {
            return Err(format!("unknown call `{name}`"));
        };
        if matches!(selector, Selector::Offset { .. }) {
            return Err(format!("`{name}` takes no @OFFSET selector"));
        }
        let copy = matches!(call, RuntimeCall::HostToDevice | RuntimeCall::DeviceToHost);
        let stall = rhs.strip_prefix("stall:");
        if !copy && (rhs == "corrupt" || stall.is_some()) {
            return Err(format!("only htod and dtoh take `{rhs}`, not `{name}`"));
        }
        let fault = if rhs == "corrupt" {
            RuntimeFault::Corrupt
        } else if let Some(ms) = stall {
            RuntimeFault::Stall(number(ms)?)
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
        Ok(())
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
    use crate::faults::{CompileFault, FaultPlan, IoFault, RuntimeFault, Selector};

    #[test]
    fn parses_every_form() {
        let plan = FaultPlan::parse(
            "read@4096=EIO; write#2=ENOSPC;read#3*=hipfile:5030;write@0x1000*=hiperr:2;\
             read=short:0;register=5027;register#2=hipfile:5028;bufregister=5023;\
             malloc>1048576;malloc#3=oom;driver=5001;compile=slow:250",
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
        assert_eq!(
            plan.compile,
            Some(CompileFault::Slow(std::time::Duration::from_millis(250)))
        );
        assert_eq!(
            FaultPlan::parse("compile=fail").unwrap().compile,
            Some(CompileFault::Fail)
        );
        let copies = FaultPlan::parse("dtoh=stall:20;htod#2=corrupt")
            .unwrap()
            .runtime;
        assert_eq!(copies[0].fault, RuntimeFault::Stall(20));
        assert_eq!(copies[1].fault, RuntimeFault::Corrupt);
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
            "streamsync=stall:5",
            "dtoh=stall:x",
            "streamsync#1=0",
            "dtoh#1=EIO",
            "htod#x=1",
            "compile=slow",
            "compile#2=fail",
        ] {
            let err = FaultPlan::parse(&format!("write#1=EIO;{bad}")).unwrap_err();
            assert_eq!(err.0, bad);
        }
    }
}
