//! Where a run's file data was staged, for `--stats`: this process's engine, the staging
//! service's, or both, when a run goes on in-process after the service is lost (or copies
//! here a file the service cannot take). Each side that copied files is named with how many
//! it copied, so the summary never credits one side with the other's files.

use aiscp_engine::{Backend, EngineInfo, StageTimes};
use serde::Serialize;
use std::fmt::Write as _;

/// What each side staged through as the run ends, with its stage times.
#[derive(Clone, Debug, Default)]
pub struct Staged {
    /// This process's engine, when it came up.
    pub here: Option<(EngineInfo, StageTimes)>,
    /// The staging service's (the copier's mover), when any file was sent there.
    pub service: Option<(EngineInfo, StageTimes)>,
}

/// Which side staged a part of the run (`--stats=json`'s `staged[].by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum By {
    /// The staging service (`aiscp --serve`).
    Service,
    /// This process's own engine.
    InProcess,
}

/// One side's share of the run, as `--stats=json` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct StagedPart {
    pub by: By,
    /// "hipFile", "cuFile", "host memory".
    pub backend: Backend,
    /// The library's version text, or for the service who it is and what it stages through.
    pub library: Option<String>,
    pub gpus: Vec<u32>,
    /// Whole files whose copy ended well on this side.
    pub files: u64,
}

impl Staged {
    /// The side the summary's single-engine fields describe: the one that copied files
    /// (this process's where both did, as before the service existed), else the one that
    /// came up.
    pub fn main(&self) -> Option<&(EngineInfo, StageTimes)> {
        let copied = |side: &&(EngineInfo, StageTimes)| side.0.files > 0;
        (self.here.as_ref().filter(copied))
            .or(self.service.as_ref().filter(copied))
            .or(self.here.as_ref())
            .or(self.service.as_ref())
    }

    /// The sides that copied files, the service first; where none did, the side that came
    /// up (so a run whose files all failed still says what it staged through).
    pub fn parts(&self) -> Vec<StagedPart> {
        let sides = [(By::Service, &self.service), (By::InProcess, &self.here)];
        let part = |(by, side): (By, &Option<(EngineInfo, StageTimes)>)| {
            side.as_ref().map(|(info, _)| StagedPart {
                by,
                backend: info.backend,
                library: info.library.clone(),
                gpus: info.gpus.clone(),
                files: info.files,
            })
        };
        let all: Vec<StagedPart> = sides.into_iter().filter_map(part).collect();
        match all.iter().any(|p| p.files > 0) {
            true => all.into_iter().filter(|p| p.files > 0).collect(),
            false => all.into_iter().rev().take(1).collect(),
        }
    }

    /// Both sides' stage times together (thread time, summed as over several workers).
    pub fn stages(&self) -> Option<StageTimes> {
        let sides = [&self.here, &self.service];
        let mut times = sides.iter().filter_map(|s| s.as_ref().map(|(_, t)| *t));
        let mut total = times.next()?;
        times.for_each(|t| total.add(&t));
        Some(total)
    }
}

/// "cuFile 1.15.1 on GPU 0", "host memory"; with both sides, each with its files:
/// "the staging service (pid 7, host memory) for 30 files; host memory for 11 files copied
/// in-process".
pub fn describe(parts: &[StagedPart]) -> String {
    match parts {
        [] => "nothing (no file had data to copy)".to_owned(),
        [one] => through(one),
        _ => parts
            .iter()
            .map(|p| {
                let files = match p.files {
                    1 => "1 file".to_owned(),
                    n => format!("{n} files"),
                };
                match p.by {
                    By::Service => format!("{} for {files}", through(p)),
                    By::InProcess => format!("{} for {files} copied in-process", through(p)),
                }
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// One side: its library (or backend) and GPUs.
fn through(part: &StagedPart) -> String {
    let mut text = part
        .library
        .clone()
        .unwrap_or_else(|| part.backend.name().to_owned());
    let gpus: Vec<String> = part.gpus.iter().map(u32::to_string).collect();
    match gpus.len() {
        0 => {}
        1 => {
            let _ = write!(text, " on GPU {}", gpus[0]);
        }
        _ => {
            let _ = write!(text, " on GPUs {}", gpus.join(","));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn side(
        backend: Backend,
        library: Option<&str>,
        gpus: &[u32],
        files: u64,
    ) -> Option<(EngineInfo, StageTimes)> {
        let info = EngineInfo {
            backend,
            library: library.map(str::to_owned),
            gpus: gpus.to_vec(),
            startup: Duration::ZERO,
            library_stats: Err(String::new()),
            files,
        };
        Some((info, StageTimes::default()))
    }

    #[test]
    fn names_each_side_that_copied() {
        let service = side(
            Backend::HipFile,
            Some("the staging service (pid 7, hipFile 0.2.0)"),
            &[0],
            30,
        );
        let both = Staged {
            here: side(Backend::HipFile, Some("hipFile 0.2.0"), &[0], 1),
            service: service.clone(),
        };
        assert_eq!(
            describe(&both.parts()),
            "the staging service (pid 7, hipFile 0.2.0) on GPU 0 for 30 files; hipFile 0.2.0 \
             on GPU 0 for 1 file copied in-process"
        );
        // The engine came up here but copied nothing: only the service is named.
        let idle_here = Staged {
            here: side(Backend::Host, None, &[], 0),
            service,
        };
        assert_eq!(
            describe(&idle_here.parts()),
            "the staging service (pid 7, hipFile 0.2.0) on GPU 0"
        );
        assert_eq!(idle_here.main().unwrap().0.files, 30);
        // Nothing copied anywhere: the engine that came up, as before.
        let none = Staged {
            here: side(Backend::Host, None, &[], 0),
            service: None,
        };
        assert_eq!(describe(&none.parts()), "host memory");
        assert_eq!(
            describe(&Staged::default().parts()),
            "nothing (no file had data to copy)"
        );
    }
}
