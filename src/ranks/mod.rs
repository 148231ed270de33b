//! One cp invocation split over MPI ranks (built with `--features mpi`, started by mpirun or
//! srun).
//!
//! Rank 0 is the cp of a one-process run: it parses, walks, makes every decision, creates
//! directories and files, prints every message and sets every attribute, in cp's order. Only
//! file data is shared out: a regular file larger than one part (two rounds of the engine's
//! slots, `--chunk-size` x `--streams` x 2) is cut into parts that go to whichever rank is
//! free, rank 0 included; a rank opens SOURCE and DEST by the paths rank 0 opened (checked
//! by inode), copies its part through its own engine and GPU, and answers with the end it
//! reached or the failure in cp's words, which rank 0 prints and folds into the exit
//! status as for any file. Rank 0 waits for a file's parts before it goes on, so directories
//! exist before their files and a directory's attributes are applied after its contents,
//! as in one process. Smaller files are copied by rank 0 alone.
//!
//! Every rank brings its engine up first and says so to rank 0, which ends the run before
//! anything is copied if one cannot (as one process ends when its backend cannot start).
//! Every rank sends its messages to rank 0 and only rank 0 sends tasks, so the ranks need no
//! more than MPI's single-threaded level.

use crate::copy::DataMover;
use crate::messages;
use crate::options::{Clobber, Options};
use aiscp_engine::{
    quote::quote, Config, CopyError, DataJob, Diagnostics, Engine, GpuChoice, NoProgress,
    ProgressSink, SourceKind, SparseMode,
};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

/// Rank 0 to a rank: a part to copy, or the end of the run.
const TASK: i32 = 1;
/// A rank to rank 0: a part's outcome, one of the three below.
const DONE: i32 = 2;
/// The part is copied; the end reached follows.
const OK: u8 = 1;
/// The part failed; cp's message follows.
const FAILED: u8 = 0;
/// The rank's engine could not start (fatal for the run, as in one process); why follows.
const NO_ENGINE: u8 = 2;
/// A rank to rank 0, once at the start: OK, or NO_ENGINE and why.
const HELLO: i32 = 3;

static RANK: AtomicI32 = AtomicI32::new(0);
static SIZE: AtomicI32 = AtomicI32::new(1);
/// Rank 0 has told the others to stop.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Whether a launcher started this process as an MPI rank (Open MPI, PMI-1/2 as MPICH's
/// hydra and Slurm give it, PMIx).
fn launched() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// Joins the MPI job when started as a rank of one. Ranks other than 0 copy the parts rank
/// 0 hands them and exit here; rank 0 gets the mover to give its copier. None for a plain
/// process or a job of one rank, which run exactly as without MPI.
///
/// `gpu_given`: `--gpu` was on the command line; without it each rank takes its node-local
/// rank modulo the node's GPUs.
pub fn join(opts: &Options, gpu_given: bool, config: &mut Config) -> Option<Coordinator> {
    if !launched() {
        // srun without an MPI plugin starts the tasks as unrelated processes, each of which
        // would copy everything into the same DEST at once.
        let tasks = std::env::var("SLURM_STEP_NUM_TASKS").ok();
        if let Some(n) = tasks.and_then(|n| n.parse::<u32>().ok()).filter(|&n| n > 1) {
            messages::error(&format!(
                "started as one of {n} Slurm tasks without MPI (no PMI or PMIx); \
                 run srun with --mpi=pmix (or pmi2), or as one task"
            ));
            messages::exit(1);
        }
        return None;
    }
    let universe = mpi::initialize()?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let local = world.split_shared(rank).rank();
    // MPI is finalized at process exit, whichever way the process exits (cp's exit paths
    // end in process::exit, which skips destructors): see `finish`.
    std::mem::forget(universe);
    RANK.store(rank, Ordering::SeqCst);
    SIZE.store(size, Ordering::SeqCst);
    // SAFETY: `finish` is a plain extern "C" fn without arguments.
    unsafe { libc::atexit(finish) };
    if size < 2 {
        return None;
    }
    if opts.clobber == Clobber::Ask {
        // Every rank sees the same options, so each stops here by itself.
        STOPPED.store(true, Ordering::SeqCst);
        if rank == 0 {
            messages::error(&format!(
                "-i (--interactive) cannot ask questions under {size} MPI ranks; \
                 run aiscp as one process to be asked"
            ));
        }
        messages::exit(1);
    }
    if !gpu_given {
        config.gpu = GpuChoice::Local(u32::try_from(local).unwrap_or(0));
    }
    let streams = config.streams.unwrap_or(aiscp_engine::DEFAULT_STREAMS) as u64;
    let piece = config.chunk_size.bytes() * streams * 2;
    if rank != 0 {
        serve(&world, rank, config);
    }
    // Every rank's backend is up before anything is touched, or the run ends as one
    // process ends when its backend cannot start.
    let mut refused: Option<(i32, String)> = None;
    for _ in 1..size {
        let (bytes, status) = world.any_process().receive_vec_with_tag::<u8>(HELLO);
        let mut d = Decoder(&bytes);
        if d.u8() == NO_ENGINE {
            let r = status.source_rank();
            if refused.as_ref().is_none_or(|(first, _)| r < *first) {
                refused = Some((r, String::from_utf8_lossy(&d.bytes()).into_owned()));
            }
        }
    }
    if let Some((r, why)) = refused {
        messages::error(&format!("rank {r}: {why}"));
        messages::exit(1);
    }
    Some(Coordinator {
        world,
        idle: (1..size).rev().collect(),
        piece,
        verify: config.verify,
        debug: config.debug,
        cancel: config.cancel.clone(),
    })
}

/// At exit: rank 0 tells the other ranks to stop (once), then every rank finalizes MPI.
extern "C" fn finish() {
    let world = SimpleCommunicator::world();
    if RANK.load(Ordering::SeqCst) == 0 && !STOPPED.swap(true, Ordering::SeqCst) {
        let stop = Task::Stop.encode();
        for r in 1..SIZE.load(Ordering::SeqCst) {
            world.process_at_rank(r).send_with_tag(&stop[..], TASK);
        }
    }
    if mpi::environment::is_initialized() && !mpi::environment::is_finalized() {
        // SAFETY: called once, from the exiting thread, after the last MPI call.
        unsafe { mpi::ffi::MPI_Finalize() };
    }
}

/// Rank 0's side: hands out the parts of each large file and copies parts itself.
pub struct Coordinator {
    world: SimpleCommunicator,
    /// Ranks waiting for a part.
    idle: Vec<i32>,
    /// Bytes per part.
    piece: u64,
    verify: bool,
    debug: bool,
    cancel: std::sync::Arc<AtomicBool>,
}

impl DataMover for Coordinator {
    fn copy(
        &mut self,
        engine: &mut Engine,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<u64, CopyError> {
        let (SourceKind::Regular { len }, Ok(dst_meta)) = (job.src_kind, job.dst.metadata()) else {
            return engine.copy(job, progress);
        };
        if len <= self.piece || !dst_meta.is_file() {
            return engine.copy(job, progress);
        }
        let paths = (fd_path(job.src), fd_path(job.dst));
        let (Some(src_path), Some(dst_path)) = paths else {
            return engine.copy(job, progress);
        };
        let src_ino = job
            .src
            .metadata()
            .map_err(|e| read_error(job.src_name, e))?
            .ino();
        let dst_name = quote(job.dst_name);
        // Parts leave holes unwritten: DST starts empty, as the engine makes it.
        job.dst.set_len(0).map_err(|e| CopyError::Write {
            name: dst_name.clone(),
            source: e,
        })?;
        let parts: Vec<Range<u64>> = (0..len)
            .step_by(self.piece as usize)
            .map(|start| start..(start + self.piece).min(len))
            .collect();
        let count = parts.len();
        let task = |i: usize, id: u64| Task::Part {
            id,
            src_path: src_path.clone(),
            dst_path: dst_path.clone(),
            src_name: job.src_name.to_owned(),
            dst_name: job.dst_name.to_owned(),
            src_ino,
            dst_ino: dst_meta.ino(),
            part: parts[i].clone(),
            last: i + 1 == count,
            sparse: job.sparse,
        };
        progress.file_started(job.src_name, Some(len));
        let mut results: Vec<Option<Result<u64, CopyError>>> = (0..count).map(|_| None).collect();
        let mut by_rank = vec![0usize; SIZE.load(Ordering::SeqCst) as usize];
        let mut out: HashMap<i32, usize> = HashMap::new();
        let mut next = 0;
        let mut stop = false;
        let mut record = |i: usize, r: Result<u64, CopyError>, stop: &mut bool| {
            match &r {
                Ok(_) => progress.advanced(parts[i].end - parts[i].start),
                Err(_) => *stop = true,
            }
            results[i] = Some(r);
        };
        loop {
            stop |= self.cancel.load(Ordering::SeqCst);
            while next < count && !stop {
                let Some(r) = self.idle.pop() else { break };
                let bytes = task(next, next as u64).encode();
                self.world
                    .process_at_rank(r)
                    .send_with_tag(&bytes[..], TASK);
                out.insert(r, next);
                by_rank[r as usize] += 1;
                next += 1;
            }
            if next < count && !stop {
                let i = next;
                next += 1;
                by_rank[0] += 1;
                let r = engine.copy_part(job, parts[i].clone(), i + 1 == count, &NoProgress);
                record(i, r, &mut stop);
            } else if out.is_empty() {
                break;
            } else {
                let (bytes, status) = self.world.any_process().receive_vec_with_tag::<u8>(DONE);
                let (i, r) = self.finished(&mut out, status.source_rank(), &bytes);
                record(i, r, &mut stop);
            }
            // Whatever else has come back, without waiting.
            while self
                .world
                .any_process()
                .immediate_probe_with_tag(DONE)
                .is_some()
            {
                let (bytes, status) = self.world.any_process().receive_vec_with_tag::<u8>(DONE);
                let (i, r) = self.finished(&mut out, status.source_rank(), &bytes);
                record(i, r, &mut stop);
            }
        }
        progress.file_finished();
        if self.debug {
            let shares: Vec<String> = by_rank
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(r, n)| format!("rank {r}: {n}"))
                .collect();
            messages::to_stderr_raw(&format!(
                "aiscp: debug: {}: {count} parts of {} bytes ({})\n",
                quote(job.src_name),
                self.piece,
                shares.join(", ")
            ));
        }
        // As one process would: the failure at the lowest offset, DST cut back to the parts
        // before it; SOURCE ending early ends DST there.
        let mut end = 0;
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Some(Ok(e)) => {
                    end = e;
                    if e < parts[i].end {
                        break;
                    }
                }
                Some(Err(e)) => {
                    let _ = job.dst.set_len(parts[i].start);
                    return Err(e);
                }
                None => {
                    let _ = job.dst.set_len(parts[i].start);
                    return Err(CopyError::Interrupted);
                }
            }
        }
        job.dst.set_len(end).map_err(|e| CopyError::Extend {
            name: dst_name,
            source: e,
        })?;
        if self.verify {
            aiscp_engine::verify::verify(job.src, job.src_name, job.dst, job.dst_name)?;
        }
        Ok(end)
    }
}

impl Coordinator {
    /// A rank's answer: which part, and how it went. The rank is idle again.
    fn finished(
        &mut self,
        out: &mut HashMap<i32, usize>,
        rank: i32,
        bytes: &[u8],
    ) -> (usize, Result<u64, CopyError>) {
        self.idle.push(rank);
        let i = out
            .remove(&rank)
            .expect("a rank answers the part it was given");
        let mut d = Decoder(bytes);
        let _id = d.u64();
        let r = match d.u8() {
            OK => Ok(d.u64()),
            FAILED => Err(CopyError::Elsewhere(
                String::from_utf8_lossy(&d.bytes()).into_owned(),
            )),
            _ => {
                // The rank's backend could not start: as in one process, that ends the run.
                let why = String::from_utf8_lossy(&d.bytes()).into_owned();
                messages::error(&format!("rank {rank}: {why}"));
                messages::exit(1);
            }
        };
        (i, r)
    }
}

/// The path the kernel has for an open file (rank 0's view, which the other ranks share).
fn fd_path(f: &File) -> Option<PathBuf> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()?;
    // "(deleted)" names, anonymous files and the like cannot be opened elsewhere.
    (link.is_absolute() && link.exists()).then_some(link)
}

fn read_error(name: &Path, e: std::io::Error) -> CopyError {
    CopyError::Read {
        name: quote(name),
        source: e,
    }
}

/// A rank other than 0: copies parts until rank 0 says stop, then exits (its failures went
/// to rank 0 with the parts).
fn serve(world: &SimpleCommunicator, rank: i32, config: &Config) -> ! {
    let diag = Box::new(RankDiagnostics {
        rank,
        quiet: config.quiet,
    });
    let mut engine = Engine::start(config.clone(), diag).map_err(|e| e.to_string());
    let mut hello = Encoder::default();
    match &engine {
        Ok(_) => hello.u8(OK),
        Err(why) => {
            hello.u8(NO_ENGINE);
            hello.bytes(why.as_bytes());
        }
    }
    world.process_at_rank(0).send_with_tag(&hello.0[..], HELLO);
    serve_parts(world, rank, &mut engine);
    // The engine gives its GPU resources back before the process exits.
    drop(engine);
    messages::exit(0)
}

fn serve_parts(world: &SimpleCommunicator, rank: i32, engine: &mut Result<Engine, String>) {
    loop {
        let (bytes, _) = world.process_at_rank(0).receive_vec_with_tag::<u8>(TASK);
        let Task::Part {
            id,
            src_path,
            dst_path,
            src_name,
            dst_name,
            src_ino,
            dst_ino,
            part,
            last,
            sparse,
        } = Task::decode(&bytes)
        else {
            return;
        };
        let result = match engine {
            Err(e) => {
                let mut reply = Encoder::default();
                reply.u64(id);
                reply.u8(NO_ENGINE);
                reply.bytes(e.as_bytes());
                world.process_at_rank(0).send_with_tag(&reply.0[..], DONE);
                continue;
            }
            Ok(engine) => {
                let open = |path: &Path, name: &Path, ino: u64, write: bool| {
                    let how = if write { "writing" } else { "reading" };
                    let file = OpenOptions::new()
                        .read(!write)
                        .write(write)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(path)
                        .map_err(|e| {
                            format!(
                                "rank {rank}: cannot open {} for {how}: {}",
                                quote(name),
                                messages::os_text(&e)
                            )
                        })?;
                    match file.metadata() {
                        Ok(m) if m.ino() == ino => Ok(file),
                        _ => Err(format!(
                            "rank {rank}: {} is not the file rank 0 opened \
                             (the ranks must share one filesystem namespace)",
                            quote(name)
                        )),
                    }
                };
                open(&src_path, &src_name, src_ino, false)
                    .and_then(|src| Ok((src, open(&dst_path, &dst_name, dst_ino, true)?)))
                    .and_then(|(src, dst)| {
                        let job = DataJob {
                            src: &src,
                            src_name: &src_name,
                            src_kind: SourceKind::Regular { len: part.end },
                            dst: &dst,
                            dst_name: &dst_name,
                            sparse,
                        };
                        engine
                            .copy_part(&job, part.clone(), last, &NoProgress)
                            .map_err(|e| e.to_string())
                    })
            }
        };
        let mut reply = Encoder::default();
        reply.u64(id);
        match result {
            Ok(end) => {
                reply.u8(OK);
                reply.u64(end);
            }
            Err(message) => {
                reply.u8(FAILED);
                reply.bytes(message.as_bytes());
            }
        }
        world.process_at_rank(0).send_with_tag(&reply.0[..], DONE);
    }
}

/// A rank's engine warnings and --debug lines, on its stderr, marked with the rank.
struct RankDiagnostics {
    rank: i32,
    quiet: bool,
}

impl Diagnostics for RankDiagnostics {
    fn warn(&mut self, line: &str) {
        if !self.quiet {
            messages::own_warning(&format!("rank {}: {line}", self.rank));
        }
    }
    fn debug(&mut self, since_start: Duration, line: &str) {
        messages::to_stderr_raw(&format!(
            "aiscp: debug: rank {}: +{:.3}s {line}\n",
            self.rank,
            since_start.as_secs_f64()
        ));
    }
}

/// What rank 0 sends.
enum Task {
    Stop,
    Part {
        id: u64,
        /// Where rank 0 opened the files, and their inodes, to check the same ones are found.
        src_path: PathBuf,
        dst_path: PathBuf,
        /// The names cp's messages use.
        src_name: PathBuf,
        dst_name: PathBuf,
        src_ino: u64,
        dst_ino: u64,
        part: Range<u64>,
        last: bool,
        sparse: SparseMode,
    },
}

impl Task {
    fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        match self {
            Task::Stop => e.u8(0),
            Task::Part {
                id,
                src_path,
                dst_path,
                src_name,
                dst_name,
                src_ino,
                dst_ino,
                part,
                last,
                sparse,
            } => {
                e.u8(1);
                e.u64(*id);
                for p in [src_path, dst_path, src_name, dst_name] {
                    e.bytes(p.as_os_str().as_bytes());
                }
                for n in [*src_ino, *dst_ino, part.start, part.end] {
                    e.u64(n);
                }
                e.u8(u8::from(*last));
                e.u8(match sparse {
                    SparseMode::Auto => 0,
                    SparseMode::Never => 1,
                    SparseMode::Always => 2,
                });
            }
        }
        e.0
    }

    fn decode(bytes: &[u8]) -> Task {
        let mut d = Decoder(bytes);
        if d.u8() == 0 {
            return Task::Stop;
        }
        let id = d.u64();
        let mut path = || PathBuf::from(std::ffi::OsStr::from_bytes(&d.bytes()));
        let (src_path, dst_path, src_name, dst_name) = (path(), path(), path(), path());
        let (src_ino, dst_ino, start, end) = (d.u64(), d.u64(), d.u64(), d.u64());
        let last = d.u8() == 1;
        let sparse = match d.u8() {
            1 => SparseMode::Never,
            2 => SparseMode::Always,
            _ => SparseMode::Auto,
        };
        Task::Part {
            id,
            src_path,
            dst_path,
            src_name,
            dst_name,
            src_ino,
            dst_ino,
            part: start..end,
            last,
            sparse,
        }
    }
}

/// Little-endian numbers and length-prefixed byte strings.
#[derive(Default)]
struct Encoder(Vec<u8>);

impl Encoder {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// Reads what [`Encoder`] wrote; the sender is this same program, so a short message is a
/// bug and panics.
struct Decoder<'a>(&'a [u8]);

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().expect("8 bytes"))
    }
    fn bytes(&mut self) -> Vec<u8> {
        let n = self.u64() as usize;
        self.take(n).to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_survive_the_wire() {
        let task = Task::Part {
            id: 7,
            src_path: PathBuf::from("/data/in/\u{e9}t\u{e9} \n x"),
            dst_path: PathBuf::from(std::ffi::OsStr::from_bytes(b"/out/\xff\xfe")),
            src_name: PathBuf::from("in/x"),
            dst_name: PathBuf::from(""),
            src_ino: u64::MAX,
            dst_ino: 12,
            part: (3 << 30)..(5 << 30) + 17,
            last: true,
            sparse: SparseMode::Always,
        };
        let Task::Part {
            id,
            src_path,
            dst_path,
            src_name,
            dst_name,
            src_ino,
            dst_ino,
            part,
            last,
            sparse,
        } = Task::decode(&task.encode())
        else {
            panic!("a part decoded as stop");
        };
        assert_eq!(
            (id, src_ino, dst_ino, last, sparse),
            (7, u64::MAX, 12, true, SparseMode::Always)
        );
        assert_eq!(part, (3 << 30)..(5 << 30) + 17);
        assert_eq!(src_path, PathBuf::from("/data/in/\u{e9}t\u{e9} \n x"));
        assert_eq!(dst_path.as_os_str().as_bytes(), b"/out/\xff\xfe");
        assert_eq!(
            (src_name, dst_name),
            (PathBuf::from("in/x"), PathBuf::new())
        );
        assert!(matches!(Task::decode(&Task::Stop.encode()), Task::Stop));
    }
}
