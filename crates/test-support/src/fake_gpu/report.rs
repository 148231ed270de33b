//! The fake's exit report (`AISCP_FAKE_GPU_REPORT`), read strictly: a line, a stat or a
//! shape the parser does not know fails the test, so the report and its one reader cannot
//! drift apart unnoticed (crates/fake-gpu/src/state.rs writes it).

use std::fmt;
use std::path::Path;

/// What the fake found at exit: what was never given back, rules broken, and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `leak:` lines, without the prefix (e.g. "stream 0x2 not destroyed").
    pub leaks: Vec<String>,
    /// `misuse:` lines, without the prefix.
    pub misuse: Vec<String>,
    pub devices: Devices,
    pub stats: Stats,
    /// `CUDA_DEVICE_MAX_CONNECTIONS` as the fake runtime found it when first called (None:
    /// unset).
    pub work_queues: Option<String>,
    /// The report as written, for failure messages (also what `Display` prints).
    pub text: String,
}

/// The `devices:` line: per device index, allocations made and bytes moved through its memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Devices {
    pub mallocs: Vec<u64>,
    pub bytes: Vec<u64>,
}

/// The `stats:` line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// hipFileRead calls (async ones, refused and faulted calls included).
    pub reads: u64,
    /// hipFileWrite calls, counted as `reads` are.
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Bytes copied host to device and device to host.
    pub htod_bytes: u64,
    pub dtoh_bytes: u64,
    /// Device allocations, and the largest one.
    pub mallocs: u64,
    pub max_alloc: u64,
    /// File handles registered.
    pub handles: u64,
    /// Threads that touched device memory.
    pub device_threads: u64,
}

impl Report {
    /// Reads and parses the report at `path`; panics (naming it) when there is none.
    pub fn read(path: &Path) -> Report {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("no fake GPU report at {}: {e}", path.display()));
        Report::parse(&text)
    }

    /// Parses a report; panics on anything the fake does not write (see the module doc).
    pub fn parse(text: &str) -> Report {
        let mut leaks = Vec::new();
        let mut misuse = Vec::new();
        let mut devices = None;
        let mut stats = None;
        let mut work_queues = None;
        for line in text.lines() {
            assert!(stats.is_none(), "a line after stats: {line:?} in\n{text}");
            if let Some(l) = line.strip_prefix("leak: ") {
                leaks.push(l.to_owned());
            } else if let Some(l) = line.strip_prefix("misuse: ") {
                misuse.push(l.to_owned());
            } else if let Some(l) = line.strip_prefix("devices: ") {
                assert!(devices.is_none(), "two devices lines in\n{text}");
                devices = Some(parse_devices(l, text));
            } else if let Some(l) = line.strip_prefix("runtime env: ") {
                assert!(work_queues.is_none(), "two runtime env lines in\n{text}");
                work_queues = Some(match l {
                    "CUDA_DEVICE_MAX_CONNECTIONS unset" => None,
                    _ => match l.strip_prefix("CUDA_DEVICE_MAX_CONNECTIONS=") {
                        Some(value) => Some(value.to_owned()),
                        None => panic!("unknown runtime env line {line:?} in\n{text}"),
                    },
                });
            } else if let Some(l) = line.strip_prefix("stats: ") {
                stats = Some(parse_stats(l, text));
            } else {
                panic!("unknown line {line:?} in the fake GPU report:\n{text}");
            }
        }
        Report {
            leaks,
            misuse,
            devices: devices.unwrap_or_else(|| panic!("no devices line in\n{text}")),
            stats: stats.unwrap_or_else(|| panic!("no stats line (last) in\n{text}")),
            work_queues: work_queues.unwrap_or_else(|| panic!("no runtime env line in\n{text}")),
            text: text.to_owned(),
        }
    }

    /// Asserts the run gave back everything it took and broke no rule.
    pub fn assert_clean(&self) {
        assert!(
            self.leaks.is_empty() && self.misuse.is_empty(),
            "fake GPU report not clean:\n{self}"
        );
    }

    /// Asserts the run gave back everything it took (misuse is checked by the caller).
    pub fn assert_no_leaks(&self) {
        assert!(
            self.leaks.is_empty(),
            "fake GPU report shows leaks:\n{self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `mallocs=1,0 bytes=4096,0`: one number per device in each list.
fn parse_devices(line: &str, text: &str) -> Devices {
    let mut devices = Devices::default();
    for field in line.split(' ') {
        let (key, list) = field
            .split_once('=')
            .unwrap_or_else(|| panic!("devices field {field:?} in\n{text}"));
        let values: Vec<u64> = list
            .split(',')
            .filter(|v| !v.is_empty())
            .map(|v| number(v, text))
            .collect();
        match key {
            "mallocs" => devices.mallocs = values,
            "bytes" => devices.bytes = values,
            _ => panic!("unknown devices field {key:?} in\n{text}"),
        }
    }
    assert_eq!(
        devices.mallocs.len(),
        devices.bytes.len(),
        "one of each per device in\n{text}"
    );
    devices
}

/// `reads=1 writes=2 ...`: every field once, and no other.
fn parse_stats(line: &str, text: &str) -> Stats {
    let mut stats = Stats::default();
    let mut seen = Vec::new();
    for field in line.split(' ') {
        let (key, value) = field
            .split_once('=')
            .unwrap_or_else(|| panic!("stats field {field:?} in\n{text}"));
        let value = number(value, text);
        let slot = match key {
            "reads" => &mut stats.reads,
            "writes" => &mut stats.writes,
            "read_bytes" => &mut stats.read_bytes,
            "write_bytes" => &mut stats.write_bytes,
            "htod_bytes" => &mut stats.htod_bytes,
            "dtoh_bytes" => &mut stats.dtoh_bytes,
            "mallocs" => &mut stats.mallocs,
            "max_alloc" => &mut stats.max_alloc,
            "handles" => &mut stats.handles,
            "device_threads" => &mut stats.device_threads,
            _ => panic!("unknown stat {key:?} (add it to Stats) in\n{text}"),
        };
        *slot = value;
        assert!(!seen.contains(&key), "stat {key} twice in\n{text}");
        seen.push(key);
    }
    assert_eq!(seen.len(), 10, "a stat missing in\n{text}");
    stats
}

fn number(value: &str, text: &str) -> u64 {
    value
        .parse()
        .unwrap_or_else(|_| panic!("{value:?} is not a count in\n{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = "stats: reads=3 writes=2 read_bytes=4096 write_bytes=8192 htod_bytes=1 \
                         dtoh_bytes=2 mallocs=1 max_alloc=65536 handles=2 device_threads=1";
    const ENV: &str = "runtime env: CUDA_DEVICE_MAX_CONNECTIONS unset\n";

    #[test]
    fn every_line_kind_is_read() {
        let text = format!(
            "runtime env: CUDA_DEVICE_MAX_CONNECTIONS=1\nleak: stream 0x2 not destroyed\n\
             misuse: hipFileRead on unregistered file handle 0x1234\n\
             devices: mallocs=1,0 bytes=4096,0\n{STATS}\n"
        );
        let r = Report::parse(&text);
        assert_eq!(r.leaks, ["stream 0x2 not destroyed"]);
        assert_eq!(r.misuse, ["hipFileRead on unregistered file handle 0x1234"]);
        assert_eq!(r.devices.mallocs, [1, 0]);
        assert_eq!(r.devices.bytes, [4096, 0]);
        assert_eq!(r.stats.reads, 3);
        assert_eq!(r.stats.max_alloc, 65536);
        assert_eq!(r.stats.device_threads, 1);
        assert_eq!(r.work_queues.as_deref(), Some("1"));
        assert_eq!(r.to_string(), text);
    }

    #[test]
    fn no_devices_is_two_empty_lists() {
        let r = Report::parse(&format!("{ENV}devices: mallocs= bytes=\n{STATS}"));
        assert!(r.devices.mallocs.is_empty() && r.devices.bytes.is_empty());
        r.assert_clean();
    }

    #[test]
    fn the_runtime_env_line_is_required_and_read() {
        let r = Report::parse(&format!("{ENV}devices: mallocs= bytes=\n{STATS}"));
        assert_eq!(r.work_queues, None);
        let missing = std::panic::catch_unwind(|| {
            Report::parse(&format!("devices: mallocs= bytes=\n{STATS}"))
        });
        assert!(
            missing.is_err(),
            "a report without the runtime env line parsed"
        );
    }

    #[test]
    #[should_panic(expected = "unknown stat \"new_counter\"")]
    fn an_unknown_stat_fails() {
        Report::parse(&format!(
            "{ENV}devices: mallocs= bytes=\n{STATS} new_counter=1"
        ));
    }

    #[test]
    #[should_panic(expected = "unknown line")]
    fn an_unknown_line_fails() {
        Report::parse(&format!("{ENV}oops\ndevices: mallocs= bytes=\n{STATS}"));
    }

    #[test]
    #[should_panic(expected = "a line after stats")]
    fn stats_come_last() {
        Report::parse(&format!("{ENV}{STATS}\ndevices: mallocs= bytes="));
    }

    #[test]
    #[should_panic(expected = "not clean")]
    fn a_leak_is_not_clean() {
        Report::parse(&format!(
            "{ENV}leak: driver open count 1\ndevices: mallocs= bytes=\n{STATS}"
        ))
        .assert_clean();
    }
}
