//! One cp invocation split over MPI ranks (built with `--features mpi`, started by mpirun or
//! srun).
//!
//! Rank 0 is the cp of a one-process run: it parses, walks, makes every decision, creates
//! directories and files, prints every message and sets every attribute, in cp's order.
//! File data is shared out (by rank 0's [`crate::data::mpi_coordinator`]): whole files go to
//! the other ranks as files in flight, to whichever has the fewest, and their endings come back to the copier's
//! files-in-flight machinery, which reports them in cp's order and applies what follows
//! the data on rank 0; a file larger than one part (two rounds of the engine's slots,
//! `--chunk-size` x `--streams` x 2) is cut into parts that whichever rank is free copies,
//! rank 0 included, while the walk waits for it. A rank (`other_rank`) opens SOURCE and DEST by
//! the paths rank 0 opened (checked by inode; a file moved or replaced since, rank 0 copies
//! through its own descriptors), copies through its own engine and GPU, and
//! answers with the end it reached or the failure in cp's words, which rank 0 prints and
//! folds into the exit status as for any file. Directories exist before their files (rank
//! 0 makes them), and a directory's attributes are set when the walk leaves it, as in one
//! process: writing a file's data does not change its directory.
//!
//! Every rank brings its engine up first and says so to rank 0, which ends the run before
//! anything is copied if one cannot (as one process ends when its backend cannot start).
//! Only rank 0 sends tasks and only to it do the others answer, each from one thread, so
//! the ranks need no more than MPI's single-threaded level.

mod other_rank;
pub mod wire;

use crate::cp::options::{Clobber, Options};
use crate::sys::messages;
use aiscp_engine::{Config, GpuChoice, QueueLimits};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use wire::{Outcome, Task, HELLO, TASK};

/// Sleeps between looks for a message, doubling from 20 µs to 1 ms: MPI's blocking receive
/// polls at full speed, which on a node with more ranks than idle cores takes the cores the
/// copies need (2,000 files of 4 KiB on the 2-core dev VM under mpirun -n 2: 2.8 s of user
/// time against one process's 0.06 s).
#[derive(Default)]
pub struct Nap(std::time::Duration);

impl Nap {
    pub fn take(&mut self) {
        use std::time::Duration;
        self.0 = (self.0 * 2).clamp(Duration::from_micros(20), Duration::from_millis(1));
        std::thread::sleep(self.0);
    }
}

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

/// Joins the MPI job when started as a rank of one. Ranks other than 0 copy what rank 0
/// hands them and exit here; rank 0 gets what its coordinator needs. None for a plain
/// process or a job of one rank, which run exactly as without MPI.
///
/// `limits`: the run's limits on files in flight, which each rank's own engine keeps.
/// `gpu_given`: `--gpu` was on the command line; without it each rank takes its node-local
/// rank modulo the node's GPUs.
pub fn join(
    opts: &Options,
    gpu_given: bool,
    config: &mut Config,
    limits: QueueLimits,
) -> Option<Rank0> {
    if !launched() {
        refuse_slurm_tasks_without_mpi();
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
    let slots = config
        .slots_per_gpu
        .unwrap_or(aiscp_engine::DEFAULT_SLOTS_PER_GPU) as u64;
    let piece = config.chunk(false).bytes() * slots * 2;
    if rank != 0 {
        other_rank::serve(&world, rank, config, limits);
    }
    await_engines(&world, size);
    Some(Rank0 { world, piece })
}

/// Rank 0 of a job of several ranks, every rank's engine up: what its coordinator
/// ([`crate::data::mpi_coordinator`]) needs.
pub struct Rank0 {
    pub world: SimpleCommunicator,
    /// Bytes per part: a larger file is cut into parts.
    pub piece: u64,
}

/// srun without an MPI plugin starts the tasks as unrelated processes, each of which would
/// copy everything into the same DEST at once: such a task refuses to run.
fn refuse_slurm_tasks_without_mpi() {
    let tasks = std::env::var("SLURM_STEP_NUM_TASKS").ok();
    if let Some(n) = tasks.and_then(|n| n.parse::<u32>().ok()).filter(|&n| n > 1) {
        messages::error(&format!(
            "started as one of {n} Slurm tasks without MPI (no PMI or PMIx); \
             run srun with --mpi=pmix (or pmi2), or as one task"
        ));
        messages::exit(1);
    }
}

/// Waits for every other rank's hello: each rank's backend is up before anything is
/// touched, or the run ends (naming the lowest rank that could not start one) as one
/// process ends when its backend cannot start.
fn await_engines(world: &SimpleCommunicator, size: i32) {
    let mut refused: Option<(i32, String)> = None;
    for _ in 1..size {
        let (bytes, status) = world.any_process().receive_vec_with_tag::<u8>(HELLO);
        if let Outcome::NoEngine(why) = Outcome::decode(&bytes) {
            let r = status.source_rank();
            if refused.as_ref().is_none_or(|(first, _)| r < *first) {
                refused = Some((r, why));
            }
        }
    }
    if let Some((r, why)) = refused {
        messages::error(&format!("rank {r}: {why}"));
        messages::exit(1);
    }
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
