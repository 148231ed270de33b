//! Bringing the engine up: on the calling thread ([`Engine::start`]), or on a thread of its
//! own ([`Engine::begin`]) while the caller plans operands, walks trees and opens the first
//! files. On the H200 machine loading libcuda and cuFile, cuInit and the GPU's context took
//! 0.35 s before the first byte could move: a caller that begins early pays only what is
//! left of that when its first file is ready.
//!
//! What the bring-up says (the fallback warning, --debug lines) is held until the caller
//! takes the engine ([`Starting::wait`]) and said then, in order, with the stamps of when it
//! happened: messages come where a synchronous start would have put them, and an engine
//! that is never taken (no file had data) says nothing, as one never started.

use crate::backend::{self, Loaded, Staging, StreamIo};
use crate::early::Early;
use crate::pipeline::Pipeline;
use crate::{devices, queue, Backend, Config, Diag, Diagnostics, Engine, StartError};
use crate::{QueueLimits, DEFAULT_STREAMS};
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One message of the bring-up, held for the caller's sink.
enum Said {
    Warn(String),
    Debug(Duration, String),
}

/// The sink the bring-up thread speaks into.
#[derive(Clone, Default)]
struct Held(Arc<Mutex<Vec<Said>>>);

impl Held {
    fn take(&self) -> Vec<Said> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
    fn push(&self, said: Said) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(said);
    }
}

impl Diagnostics for Held {
    fn warn(&mut self, line: &str) {
        self.push(Said::Warn(line.to_owned()));
    }
    fn debug(&mut self, since_start: Duration, line: &str) {
        self.push(Said::Debug(since_start, line.to_owned()));
    }
}

/// The engine being brought up; [`Starting::wait`] takes it. Dropped untaken, it waits for
/// the bring-up and shuts the engine down (a GPU library torn out from under its own
/// initialisation at process exit could crash the exit).
pub struct Starting {
    state: State,
    sink: Box<dyn Diagnostics>,
    started: Instant,
    debug: bool,
    /// Bytes of a slice, and of the first round of slices (what the first file may read
    /// ahead while it waits).
    chunk: u64,
    read_ahead: usize,
    /// Stops the reading ahead too.
    cancel: Arc<AtomicBool>,
    /// Whether files may take the bounce route (the only one that uses bytes read ahead:
    /// the library reads registered files itself).
    may_bounce: bool,
}

enum State {
    Thread {
        thread: JoinHandle<(Result<Engine, StartError>, Duration)>,
        held: Held,
    },
    /// Host memory needs no bring-up (or no thread could be had): started when waited for.
    Later(Config),
    Taken,
}

impl Engine {
    /// Brings up the backend on this thread. Warnings and (with `config.debug`) --debug lines
    /// go to `diag`.
    pub fn start(config: Config, diag: Box<dyn Diagnostics>) -> Result<Engine, StartError> {
        bring_up(config, diag, Instant::now())
    }

    /// Begins bringing up the backend on a thread of its own, and allocates there what
    /// every copy needs (the first staging slot and its host windows). Take the engine with
    /// [`Starting::wait`] when the first file's data is to move.
    pub fn begin(config: Config, diag: Box<dyn Diagnostics>) -> Starting {
        let started = Instant::now();
        let debug = config.debug;
        let cancel = Arc::clone(&config.cancel);
        let may_bounce = backend::may_bounce(&config.request());
        let chunk = config.chunk_size.bytes();
        let read_ahead = chunk as usize * config.streams.unwrap_or(DEFAULT_STREAMS);
        let state = match config.backend {
            backend::BackendChoice::Host => State::Later(config),
            _ => {
                let held = Held::default();
                let sink = Box::new(held.clone());
                let spawn = std::thread::Builder::new()
                    .name("aiscp-bring-up".into())
                    .spawn({
                        let config = config.clone();
                        move || {
                            let engine = bring_up(config, sink, started).map(|mut e| {
                                e.warm_up();
                                e
                            });
                            (engine, started.elapsed())
                        }
                    });
                match spawn {
                    Ok(thread) => State::Thread { thread, held },
                    Err(_) => State::Later(config),
                }
            }
        };
        Starting {
            state,
            sink: diag,
            started,
            debug,
            chunk,
            read_ahead,
            cancel,
            may_bounce,
        }
    }
}

impl Starting {
    /// Whether the bring-up has ended (well or not): [`Starting::wait`] returns at once.
    pub fn is_ready(&self) -> bool {
        match &self.state {
            State::Thread { thread, .. } => thread.is_finished(),
            State::Later(_) | State::Taken => true,
        }
    }

    /// [`Starting::wait`], reading the start of `src` (the first file to copy, of `len`
    /// bytes) meanwhile, up to the first round of slices, for its copy to use: the time the
    /// bring-up still takes is spent on the file. Only a file larger than one slice is read
    /// ahead: a smaller one may be queued, and a queued copy reads its file itself.
    pub fn wait_reading(self, src: &File, len: u64) -> Result<Engine, StartError> {
        let asked = self.started.elapsed();
        let early = match self.may_bounce && !self.is_ready() && len > self.chunk {
            true => Early::read(src, len, self.read_ahead, || {
                self.is_ready() || self.cancel.load(Ordering::SeqCst)
            }),
            false => None,
        };
        let mut engine = self.finish(asked)?;
        if let Backend::Gpu(p) = &mut engine.backend {
            p.early = early;
        }
        Ok(engine)
    }

    /// Waits for the bring-up to end, says what it said, and returns the engine (or why it
    /// could not start).
    pub fn wait(self) -> Result<Engine, StartError> {
        let asked = self.started.elapsed();
        self.finish(asked)
    }

    /// [`Starting::wait`] for a caller that asked at `asked`.
    fn finish(mut self, asked: Duration) -> Result<Engine, StartError> {
        let sink = std::mem::replace(&mut self.sink, Box::new(Held::default()));
        match std::mem::replace(&mut self.state, State::Taken) {
            State::Later(config) => bring_up(config, sink, self.started),
            State::Thread { thread, held } => {
                let (engine, ready) = match thread.join() {
                    Ok(done) => done,
                    Err(panic) => std::panic::resume_unwind(panic),
                };
                let mut diag = Diag {
                    sink,
                    started: self.started,
                    debug: self.debug,
                };
                for said in held.take() {
                    match said {
                        Said::Warn(line) => diag.sink.warn(&line),
                        Said::Debug(at, line) => diag.sink.debug(at, &line),
                    }
                }
                let waited = ready.saturating_sub(asked).as_secs_f64();
                diag.debug(&format!(
                    "brought up on its own thread by +{:.3}s; asked for at +{:.3}s, waited \
                     {waited:.3} s",
                    ready.as_secs_f64(),
                    asked.as_secs_f64(),
                ));
                engine.map(|mut e| {
                    e.diag.sink = diag.sink;
                    e
                })
            }
            State::Taken => unreachable!("a Starting is taken once"),
        }
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let State::Thread { thread, .. } = std::mem::replace(&mut self.state, State::Taken) {
            // The engine, if it came up, is shut down here; nothing it said is shown.
            drop(thread.join());
        }
    }
}

/// What [`Engine::start`] does, with `started` as the time --debug stamps count from.
fn bring_up(
    config: Config,
    diag: Box<dyn Diagnostics>,
    started: Instant,
) -> Result<Engine, StartError> {
    if config.streams == Some(0) {
        return Err(StartError::Streams);
    }
    let mut diag = Diag {
        sink: diag,
        started,
        debug: config.debug,
    };
    let (loaded, fell_back) = backend::load(&config.request(), &mut |l| diag.debug(l))?;
    if let Some(warning) = fell_back {
        diag.sink.warn(&warning);
    }
    let chunk = config.chunk_size.bytes() as usize;
    let streams = config.streams.unwrap_or(DEFAULT_STREAMS);
    let mut spread = None;
    let backend = match loaded {
        Loaded::Host(h) => {
            diag.debug("backend host memory");
            if config.async_io {
                diag.sink
                    .warn("--async has no effect with host memory staging; using threads");
            }
            Backend::Host(Pipeline::new(h, chunk, streams))
        }
        Loaded::Gpu(g) => {
            let mut pipeline = Pipeline::new(g, chunk, streams);
            if let (true, Some(library)) = (config.async_io, pipeline.staging.library()) {
                match library.check_async() {
                    Ok(()) => {
                        pipeline.async_io = true;
                        diag.debug(&format!(
                            "async: one stream per worker, registered with flags {:#x}",
                            backend::gpu::STREAM_FLAGS
                        ));
                    }
                    Err(e) => diag.sink.warn(&format!(
                        "--async is not available ({e}); using the threaded engine"
                    )),
                }
            }
            spread = devices::Spread::new(&config.gpu, &pipeline.staging);
            Backend::Gpu(pipeline)
        }
    };
    let gpus = spread.as_ref().map_or(1, devices::Spread::gpus);
    diag.debug(&format!(
        "chunk {chunk} bytes, {streams} stream(s){}: up to {} bytes of staging memory",
        match gpus {
            1 => String::new(),
            n => format!(" on each of {n} GPUs"),
        },
        chunk * streams * gpus
    ));
    Ok(Engine {
        backend,
        config,
        diag,
        spread,
        limits: QueueLimits::default(),
        landed: queue::Landed::default(),
        warm: None,
    })
}

impl Engine {
    /// Allocates the first slot and its windows ahead of the first copy, as the first copy
    /// would; a failure is kept for the first copy to report with its file's name.
    fn warm_up(&mut self) {
        match self.first_slots("") {
            Ok(()) => self.diag.debug("first slot and windows allocated"),
            Err(e) => self.warm = Some(e),
        }
    }
}

impl Drop for Engine {
    /// Shuts down in the order the libraries want (workers, then each slot's windows and
    /// buffer, then the GPU's context and the I/O driver), timing each part for --debug:
    /// what the end of a run costs shows beside what its start did.
    fn drop(&mut self) {
        let began = Instant::now();
        let (slots, context) = match &mut self.backend {
            Backend::Host(p) => (p.free_slots(), Duration::ZERO),
            Backend::Gpu(p) => {
                let slots = p.free_slots();
                let at = Instant::now();
                if let Some(staging) = Arc::get_mut(&mut p.staging) {
                    staging.release();
                }
                (slots, at.elapsed())
            }
        };
        self.diag.debug(&format!(
            "shut down in {:.3} s: workers and slots {:.3} s, GPU context and driver {:.3} s",
            began.elapsed().as_secs_f64(),
            slots.as_secs_f64(),
            context.as_secs_f64()
        ));
    }
}

impl<S: Staging> Pipeline<S> {
    /// Stops the workers and frees every slot; returns the time it took.
    fn free_slots(&mut self) -> Duration {
        let at = Instant::now();
        self.flight = None;
        self.threads = None;
        self.slots.iter_mut().for_each(|s| *s = None);
        at.elapsed()
    }
}
