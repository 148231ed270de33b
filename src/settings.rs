//! The run's settings from the environment, read once in `main` and handed down: how many
//! files a tree copy keeps in flight (the engine's limits, the open-file limit's share, and
//! `AISCP_IN_FLIGHT`, the override for measuring them), which staging service a copy uses
//! (`AISCP_SERVICE`), and `POSIXLY_CORRECT`. Each is read in one place, so the copier, the
//! service and the MPI ranks cannot read one differently.

use crate::service::Choice;
use aiscp_engine::QueueLimits;
use nix::sys::resource::{getrlimit, Resource};

/// What a run takes from the environment.
pub struct Settings {
    /// The limits files in flight run under.
    pub queue_limits: QueueLimits,
    /// Which staging service a copy hands its data to.
    pub service: Choice,
    /// `POSIXLY_CORRECT` is set: cp then writes through a dangling symlink at DEST.
    pub posixly_correct: bool,
}

impl Settings {
    /// A copy's settings; Err is the message refusing a malformed one, before anything is
    /// copied, as every other bad setting is refused: a value silently ignored would measure
    /// the defaults under another name. Read once the open-file limit is raised, which
    /// bounds the files in flight.
    pub fn for_copy() -> Result<Settings, String> {
        Ok(Settings {
            queue_limits: queue_limits(in_flight_setting()?.as_ref()),
            service: Choice::from_env(),
            posixly_correct: std::env::var_os("POSIXLY_CORRECT").is_some(),
        })
    }

    /// The staging service's limits on files in flight: those of a copy, where a malformed
    /// `AISCP_IN_FLIGHT` leaves the defaults (the service has no run of its own to refuse).
    pub fn service_queue_limits() -> QueueLimits {
        queue_limits(in_flight_setting().ok().flatten().as_ref())
    }
}

/// Small files handed to a worker at once ([`QueueLimits::batch`]): the walk waits for a
/// file only through the engine, which sends what it holds first. One wake of a worker per
/// 16 files instead of one per file (bench/results/HISTORY.md, "Small files: fewer system
/// calls a file").
const SMALL_FILES_BATCH: usize = 16;

/// The variable that overrides the engine's files-in-flight limits.
const IN_FLIGHT_VAR: &str = "AISCP_IN_FLIGHT";

/// AISCP_IN_FLIGHT's value: `FILES[,BYTES[,DIRECT_FROM]]`, each a whole number.
struct InFlightSetting {
    files: u64,
    bytes: Option<u64>,
    direct_from: Option<u64>,
}

/// Parses AISCP_IN_FLIGHT's value; Err is the message refusing it.
fn parse_in_flight(value: &std::ffi::OsStr) -> Result<InFlightSetting, String> {
    let refuse = || {
        format!(
            "invalid value {} for {IN_FLIGHT_VAR}: expected FILES[,BYTES[,DIRECT_FROM]], \
             whole numbers",
            aiscp_engine::quote::quote(value)
        )
    };
    let text = value.to_str().ok_or_else(refuse)?;
    let numbers = text
        .split(',')
        .map(|p| p.trim().parse::<u64>().map_err(|_| refuse()))
        .collect::<Result<Vec<u64>, String>>()?;
    match numbers[..] {
        [files] => Ok(InFlightSetting {
            files,
            bytes: None,
            direct_from: None,
        }),
        [files, bytes] => Ok(InFlightSetting {
            files,
            bytes: Some(bytes),
            direct_from: None,
        }),
        [files, bytes, direct_from] => Ok(InFlightSetting {
            files,
            bytes: Some(bytes),
            direct_from: Some(direct_from),
        }),
        _ => Err(refuse()),
    }
}

/// AISCP_IN_FLIGHT as set (None: unset); Err is the message refusing a malformed value.
fn in_flight_setting() -> Result<Option<InFlightSetting>, String> {
    std::env::var_os(IN_FLIGHT_VAR)
        .map(|v| parse_in_flight(&v))
        .transpose()
}

/// `AISCP_IN_FLIGHT=FILES[,BYTES[,DIRECT_FROM]]` overrides the engine's limits (0 files: one
/// file at a time), for measuring them; the defaults are chosen by the runs in
/// bench/results/HISTORY.md, "2026-12-01, dev VM: many files in flight". Each file
/// in flight holds two descriptors, until a file worker closes them after the file's turn
/// (`Engine::retire`): at most a quarter of the open-file limit goes to files in flight,
/// about as many again to those waiting to be closed, and none under a limit below 64.
fn queue_limits(setting: Option<&InFlightSetting>) -> QueueLimits {
    let mut limits = QueueLimits {
        batch: SMALL_FILES_BATCH,
        ..QueueLimits::default()
    };
    if let Some(set) = setting {
        limits.files = usize::try_from(set.files).unwrap_or(usize::MAX);
        if let Some(bytes) = set.bytes {
            limits.bytes = bytes;
        }
        if let Some(direct_from) = set.direct_from {
            limits.direct_from = direct_from;
        }
    }
    if let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NOFILE) {
        // Under a tight limit the walk's own descriptors (two per open level) need them
        // all: one file at a time, as cp.
        limits.files = match soft {
            n if n < 64 => 0,
            n => limits.files.min((n / 8) as usize),
        };
    }
    limits
}
