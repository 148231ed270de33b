//! Digest pieces computed on the GPU, on the bytes a slot holds: kernels.cu compiled at run
//! time (NVRTC / hiprtc, through hipfile-rs), loaded on each GPU, launched on a stream of
//! the slot's own.
//!
//! [`GpuDigests::prepare`] (or the first slice to hash) reads a kept image from the kernel
//! cache, else compiles the kernels, once per process, on a thread of its own, so copying
//! never waits for the compiler. The read is the one wait: the slices it holds up would
//! otherwise hash on the CPU, and the cache is a small file of the user's own.
//! Until the kernels are ready, and for good when the compiler is missing or fails, a slice
//! is hashed on the CPU from a download of the slot: the digest stays one of the staged
//! bytes (not of DEST read back), and the copy goes on at the CPU's speed. Why digests were
//! computed where they were is kept for --debug ([`GpuDigests::describe`]).

use super::algorithm::Algorithm;
use super::hashing::{Hashing, Queued};
use super::kernel_cache::{self, KernelCache};
use super::launch::{Kernels, Scratch};
use super::piece::{Piece, CHUNK_LEN};
use hipfile::{Compiler, Device, DeviceBuffer, Error, Flavor};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the end of a run waits for a compile under way ([`GpuDigests::wait_for_compile`]):
/// many times NVRTC's (BENCHMARKS.md, "Digests on the GPU"), short beside a hung compiler.
const COMPILE_WAIT: Duration = Duration::from_secs(5);

/// The kernels' source: plain C++ that NVRTC, hiprtc and g++ all take.
pub const SOURCE: &str = include_str!("kernels.cu");

/// The compiler options the kernels are built with for a GPU of architecture `arch`
/// ("sm_90", "gfx90a"; None: the compiler's default). NVRTC optimizes fully by default and
/// wants the real architecture for a CUBIN; hiprtc takes clang's -O3, and compiles for the
/// current device unless told.
pub fn compile_options(flavor: Flavor, arch: Option<&str>) -> Vec<String> {
    let mut options: Vec<String> = arch
        .map(|arch| format!("--gpu-architecture={arch}"))
        .into_iter()
        .collect();
    if flavor == Flavor::HipFile {
        options.push("-O3".to_owned());
    }
    options
}

/// Where the compiled image stands.
enum Build {
    NotStarted,
    /// `keep`: the kernel cache can take the image (worth waiting for at the end).
    Compiling {
        keep: bool,
    },
    Ready(Image),
    Failed(String),
}

/// The kernels' image, ready to load, and where it came from (for --debug).
struct Image {
    bytes: Arc<Vec<u8>>,
    /// The compiler that made it ("NVRTC 13.0").
    compiler: String,
    origin: Origin,
}

enum Origin {
    /// Compiled by this process, in `took`; `stored` says whether the cache kept it.
    Compiled {
        took: Duration,
        stored: Result<(), String>,
    },
    /// Read from the kernel cache.
    Cached(PathBuf),
}

/// One GPU's kernels, or why it has none.
type Loaded = Result<Arc<Kernels>, String>;

/// The run's digest kernels: the compile, each GPU's loaded module, and the counts for
/// --debug. Shared by the workers.
pub struct GpuDigests {
    flavor: Flavor,
    /// The compiler's exact file (the environment's override), else searched.
    compiler_path: Option<PathBuf>,
    build: Arc<Mutex<Build>>,
    /// Per GPU (by its position in the run): the loaded kernels, or why not; None until
    /// first asked for, and again after a cached image failed to load.
    loaded: Vec<Mutex<Option<Loaded>>>,
    on_gpu: AtomicU64,
    on_cpu: AtomicU64,
    /// Why the last slice hashed on the CPU was.
    cpu_why: Mutex<Option<String>>,
    /// Set once a cached image failed to load: [`GpuDigests::prepare`] then compiles without
    /// reading the cache.
    skip_cache: AtomicBool,
}

impl GpuDigests {
    /// For a run on `gpus` GPUs of `flavor`; nothing is compiled yet.
    pub fn new(flavor: Flavor, compiler_path: Option<PathBuf>, gpus: usize) -> GpuDigests {
        GpuDigests {
            flavor,
            compiler_path,
            build: Arc::new(Mutex::new(Build::NotStarted)),
            loaded: (0..gpus).map(|_| Mutex::new(None)).collect(),
            on_gpu: AtomicU64::new(0),
            on_cpu: AtomicU64::new(0),
            cpu_why: Mutex::new(None),
            skip_cache: AtomicBool::new(false),
        }
    }

    /// Makes the kernels' image ready, once: read from the kernel cache here (a small file,
    /// so the first slices find it), else compiled on a thread of its own. `device` says
    /// which architecture.
    pub fn prepare(&self, device: &Device) {
        let mut build = self.build.lock().unwrap();
        if !matches!(*build, Build::NotStarted) {
            return;
        }
        let recipe = match device.compile_arch() {
            Ok(arch) => Recipe::new(
                self.flavor,
                self.compiler_path.clone(),
                device.runtime_path(),
                arch.as_deref(),
            ),
            Err(e) => {
                *build = Build::Failed(e.to_string());
                return;
            }
        };
        if !self.skip_cache.load(Ordering::Relaxed) {
            if let Some(image) = recipe.cached() {
                *build = Build::Ready(image);
                return;
            }
        }
        *build = Build::Compiling {
            keep: recipe.cache.as_ref().is_ok_and(KernelCache::writable),
        };
        drop(build);
        let shared = self.build.clone();
        let spawned = std::thread::Builder::new()
            .name("digest-compile".into())
            .spawn(move || {
                *shared.lock().unwrap() = match recipe.compile() {
                    Ok(image) => Build::Ready(image),
                    Err(why) => Build::Failed(why),
                };
            });
        if let Err(e) = spawned {
            *self.build.lock().unwrap() = Build::Failed(format!("cannot start a thread: {e}"));
        }
    }

    /// At the end of a one-off run: waits for a compile still under way, up to 5 s
    /// (`COMPILE_WAIT`) or until `stop` is set, so that its image reaches the kernel cache;
    /// returns how long it waited (None: no wait). A run shorter than the compile (a small
    /// file) would otherwise end it unstored, and every such run would compile again, for
    /// nothing, never finding a kept image. No wait where the cache cannot take the image.
    pub fn wait_for_compile(&self, stop: &AtomicBool) -> Option<Duration> {
        let compiling = || matches!(*self.build.lock().unwrap(), Build::Compiling { keep: true });
        if !compiling() {
            return None;
        }
        let started = Instant::now();
        while compiling() && !stop.load(Ordering::SeqCst) && started.elapsed() < COMPILE_WAIT {
            std::thread::sleep(Duration::from_millis(2));
        }
        Some(started.elapsed())
    }

    /// Waits for the compile started by [`GpuDigests::prepare`] to end: Err says why it
    /// failed (or that it was never started). For tests and benchmarks; the copy never
    /// waits.
    pub fn wait_ready(&self) -> Result<(), String> {
        loop {
            match &*self.build.lock().unwrap() {
                Build::Ready(_) => return Ok(()),
                Build::Failed(why) => return Err(why.clone()),
                Build::NotStarted => return Err("not started".to_owned()),
                Build::Compiling { .. } => {}
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The kernels for GPU `gpu` (its position in the run) on `device`, or why there are
    /// none (yet). A cached image the GPU refuses is removed and compiled afresh.
    fn kernels(&self, gpu: usize, device: &Device) -> Result<Arc<Kernels>, String> {
        let (image, cached) = match &*self.build.lock().unwrap() {
            Build::Ready(Image { bytes, origin, .. }) => (bytes.clone(), origin.cached()),
            Build::NotStarted | Build::Compiling { .. } => {
                return Err("the kernels were still compiling".to_owned())
            }
            Build::Failed(why) => return Err(why.clone()),
        };
        let mut loaded = self.loaded[gpu].lock().unwrap();
        let kernels = loaded.get_or_insert_with(|| {
            Kernels::load(device, &image)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        });
        match (kernels, cached) {
            (Ok(kernels), _) => Ok(kernels.clone()),
            (Err(why), Some(path)) => {
                let why = format!("the cached kernels did not load ({why}); compiling them");
                *loaded = None;
                drop(loaded);
                self.skip_cache.store(true, Ordering::Relaxed);
                // Once, whichever worker finds it first, and under the lock: a worker that
                // found the refusal late must not remove the image that the compile started
                // by the first one has stored meanwhile (seen once in CI, under load).
                let mut build = self.build.lock().unwrap();
                if let Build::Ready(Image {
                    origin: Origin::Cached(_),
                    ..
                }) = &*build
                {
                    kernel_cache::forget(&path, &image);
                    *build = Build::NotStarted;
                    drop(build);
                    self.prepare(device);
                }
                Err(why)
            }
            (Err(why), None) => Err(format!(
                "loading the kernels on GPU {}: {why}",
                device.index()
            )),
        }
    }

    /// The piece of the slot's first `len` bytes (file offset `start`): queued on the GPU
    /// when the kernels are ready ([`GpuDigests::hashed`] collects it), else hashed on the
    /// CPU from a download. `Done(None)`: a BLAKE3 slice off the chunk grid, which the
    /// file's finish reads back from DEST.
    pub fn hash(
        &self,
        gpu: usize,
        scratch: &mut Option<Scratch>,
        data: &DeviceBuffer,
        len: usize,
        start: u64,
        algorithm: Algorithm,
    ) -> Result<Hashing, Error> {
        if algorithm == Algorithm::Blake3 && start % CHUNK_LEN != 0 {
            return Ok(Hashing::Done(None));
        }
        self.prepare(data.device());
        match self.kernels(gpu, data.device()) {
            Ok(kernels) => {
                let scratch = match scratch {
                    Some(s) => s,
                    None => scratch.insert(Scratch::new(data)?),
                };
                let hashing = kernels.queue(scratch, data, len as u64, start, algorithm)?;
                self.on_gpu.fetch_add(1, Ordering::Relaxed);
                Ok(hashing)
            }
            Err(why) => {
                let mut bytes = vec![0u8; len];
                data.copy_to_host(0, &mut bytes)?;
                self.on_cpu.fetch_add(1, Ordering::Relaxed);
                *self.cpu_why.lock().unwrap() = Some(why);
                Ok(Hashing::Done(Some(Piece::of_bytes(
                    algorithm, start, &bytes,
                ))))
            }
        }
    }

    /// The piece [`GpuDigests::hash`] queued, once the GPU is done with it.
    pub fn hashed(&self, scratch: &mut Option<Scratch>, queued: Queued) -> Result<Piece, Error> {
        scratch
            .as_mut()
            .expect("work was queued on this scratch")
            .collect(queued)
    }

    /// For --debug: where the run's digests were computed, and why; None when no slice
    /// was hashed here.
    pub fn describe(&self) -> Option<String> {
        let (gpu, cpu) = (
            self.on_gpu.load(Ordering::Relaxed),
            self.on_cpu.load(Ordering::Relaxed),
        );
        let on_gpu = match &*self.build.lock().unwrap() {
            Build::Ready(Image {
                compiler, origin, ..
            }) => {
                let origin = match origin {
                    Origin::Compiled { took, stored } => format!(
                        "compiled in {:.3} s{}",
                        took.as_secs_f64(),
                        match stored {
                            Ok(()) => String::new(),
                            Err(why) => format!(", not cached: {why}"),
                        }
                    ),
                    Origin::Cached(path) => format!("from the kernel cache, {}", path.display()),
                };
                format!("digests computed on the GPU ({compiler}, {origin}): {gpu} slice(s)")
            }
            _ => String::new(),
        };
        let why = self.cpu_why.lock().unwrap().clone().unwrap_or_default();
        match (gpu, cpu) {
            (0, 0) => None,
            (_, 0) => Some(on_gpu),
            (0, _) => Some(format!(
                "digests computed on the CPU: {why}: {cpu} slice(s)"
            )),
            _ => Some(format!("{on_gpu}; on the CPU: {cpu} slice(s) ({why})")),
        }
    }
}

impl Origin {
    fn cached(&self) -> Option<PathBuf> {
        match self {
            Origin::Cached(path) => Some(path.clone()),
            Origin::Compiled { .. } => None,
        }
    }
}

/// How the kernels are compiled for one GPU architecture, and the cache key that makes.
///
/// The key leaves out the compiler's version, so that the cache is read without loading the
/// compiler: loading NVRTC from a cold page cache outlasted the first slices of a copy, which
/// then hashed on the CPU. An image the installed driver can no longer load is refused at
/// load time and compiled afresh ([`GpuDigests::kernels`]); a newer compiler's image is made
/// only once the cache is cleared (README). A compiler the environment names by its file is
/// in the key, so that choosing another one compiles with it.
struct Recipe {
    flavor: Flavor,
    /// The compiler's exact file, else searched.
    path: Option<PathBuf>,
    /// The runtime's file, the compiler of last resort ([`Compiler::load_for`]).
    runtime: PathBuf,
    options: Vec<String>,
    key: String,
    /// Where the image is looked for and kept, opened once; Err says why there is none.
    cache: Result<KernelCache, String>,
}

impl Recipe {
    fn new(flavor: Flavor, path: Option<PathBuf>, runtime: &Path, arch: Option<&str>) -> Recipe {
        // The architecture is in the options, so in the key: an image kept for one GPU is
        // never offered to another.
        let options = compile_options(flavor, arch);
        let chosen = path
            .as_deref()
            .map(|p| p.as_os_str().as_encoded_bytes())
            .unwrap_or_default();
        let key = KernelCache::key(&[
            SOURCE.as_bytes(),
            flavor.name().as_bytes(),
            chosen,
            options.join("\n").as_bytes(),
        ]);
        Recipe {
            flavor,
            path,
            runtime: runtime.to_path_buf(),
            options,
            key,
            cache: KernelCache::open(),
        }
    }

    /// The image the kernel cache holds for this recipe, if any.
    fn cached(&self) -> Option<Image> {
        let found = self.cache.as_ref().ok()?.load(&self.key)?;
        Some(Image {
            bytes: Arc::new(found.image),
            compiler: found.compiler,
            origin: Origin::Cached(found.path),
        })
    }

    /// Compiles the kernels, and keeps the image in the kernel cache (replacing one the GPU
    /// refused).
    fn compile(self) -> Result<Image, String> {
        let started = Instant::now();
        // Never unloaded: this thread may still be running while the process exits, and a
        // dlclose racing exit's own finalizers crashed the process (the fake GPU library,
        // which is also the runtime, was unmapped under the main thread). At most one a
        // process: a cache hit loads none.
        let compiler: &Compiler = Box::leak(Box::new(
            Compiler::load_for(self.flavor, self.path.as_deref(), &self.runtime)
                .map_err(|e| e.to_string())?,
        ));
        let name = compiler
            .version()
            .unwrap_or_else(|| compiler.name().to_owned());
        let options: Vec<&str> = self.options.iter().map(String::as_str).collect();
        let image = compiler
            .compile(SOURCE, "kernels.cu", &options)
            .map_err(|e| format!("{}: {e}", compiler.name()))?;
        let stored = self
            .cache
            .and_then(|c| c.store(&self.key, &image, &name).map_err(|e| e.to_string()));
        Ok(Image {
            bytes: Arc::new(image),
            compiler: name,
            origin: Origin::Compiled {
                took: started.elapsed(),
                stored,
            },
        })
    }
}
