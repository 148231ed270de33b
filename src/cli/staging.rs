//! Flags that choose how data is staged through the GPU (owned with the engine).

use aiscp_engine::{BackendChoice, ChunkSize, Config, GpuChoice, RouteChoice, Verify};
use clap::{Args, ValueEnum};
use std::io::IsTerminal;

/// Where the progress goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Off,
    /// One line redrawn in place on the terminal on stderr; `keep`: its last state stays on
    /// screen at the end (`--progress` asked for it), else it is wiped as cp leaves nothing.
    Terminal {
        keep: bool,
    },
    /// Plain lines on stderr every `progress::LINE_INTERVAL` (stderr is a file or a pipe),
    /// and a last one at the end.
    Lines,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BackendArg {
    Auto,
    Gpu,
    Hipfile,
    Cufile,
    Host,
}

/// `--verify[=HOW]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VerifyArg {
    Bytes,
    Sums,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RouteArg {
    Auto,
    Library,
    Bounce,
}

#[derive(Args, Debug, Clone)]
pub struct StagingArgs {
    /// Staging backend: auto tries hipFile, then cuFile, then host memory (with a warning);
    /// gpu is hipFile or cuFile, an error if neither loads
    #[arg(
        long,
        value_enum,
        env = "AISCP_BACKEND",
        default_value = "auto",
        help_heading = "GPU staging"
    )]
    pub backend: BackendArg,
    /// GPU(s) to stage through: an index, a list (0,2,3), all, or auto (each file on the GPU
    /// nearest its storage by PCI path and NUMA node, all GPUs where that is unknown). With
    /// several, each GPU gets STREAMS slots and a file's slices go to whichever is free
    #[arg(
        long,
        value_name = "N|LIST|all|auto",
        value_parser = parse_gpu,
        default_value = "0",
        allow_hyphen_values = true,
        help_heading = "GPU staging"
    )]
    pub gpu: GpuChoice,
    /// How bytes reach GPU memory: library = hipFileRead/Write (cuFileRead/Write) on
    /// registered files; bounce = O_DIRECT reads into pinned host memory, copied into the GPU
    /// buffer and back out, then O_DIRECT writes; auto = library where it can DMA (hipFile,
    /// cuFile with nvidia-fs), except that files under 1 MiB copied many at once (in flight)
    /// bounce; bounce where cuFile would only emulate it (compatibility mode)
    #[arg(
        long,
        value_enum,
        env = "AISCP_ROUTE",
        default_value = "auto",
        help_heading = "GPU staging"
    )]
    pub route: RouteArg,
    /// Bytes per slice; GPU memory used = STREAMS x SIZE on each GPU. E.g. 64M, 1GiB,
    /// 0x7ffff000 (at most that), rounded up to a multiple of 4 KiB, and down to a file's
    /// direct-I/O alignment where that is larger [default: 64M on a GPU, 16M on host memory]
    #[arg(
        long,
        value_name = "SIZE",
        value_parser = parse_chunk_size,
        allow_hyphen_values = true,
        help_heading = "GPU staging"
    )]
    pub chunk_size: Option<ChunkSize>,
    /// Staging slots per GPU: each holds one slice in flight in its own buffer of
    /// --chunk-size bytes [default: 4]
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..=256),
        allow_hyphen_values = true,
        help_heading = "GPU staging"
    )]
    pub streams: Option<u64>,
    /// Use hipFile's asynchronous stream API (one stream per slice)
    #[arg(long = "async", help_heading = "GPU staging")]
    pub async_io: bool,
    /// Show the run's progress on stderr: a bar with the percentage, bytes, files, rate and
    /// ETA redrawn in place on a terminal, a plain line every 2 seconds otherwise (for logs);
    /// asked for, its last line stays at the end [default: only when stderr is a terminal]
    #[arg(long, overrides_with = "no_progress", help_heading = "Reporting")]
    pub progress: bool,
    /// Never show progress
    #[arg(long, overrides_with = "progress", help_heading = "Reporting")]
    pub no_progress: bool,
    /// After each file, read it back and fail if it is not what was copied. bytes (the
    /// default): SOURCE and DEST are read back (DEST with O_DIRECT, so the disk is checked,
    /// not the page cache) and compared, naming the first differing offset; a SOURCE that
    /// cannot be read twice (a pipe, a device, a /proc file) is copied, then fails: "cannot
    /// verify". Measured cost (virtio disk, caches dropped, with sync; three runs): 0.9-1.3x
    /// the unverified time for 20,000 files of 1-64 KiB, 1.1-1.3x for a 2 GiB file. sums:
    /// only DEST is read back, and its digest compared with the one taken of the staged
    /// bytes while copying (--sums's algorithm, else BLAKE3). Files in flight are read back
    /// while the next ones copy
    #[arg(long, value_name = "HOW", num_args = 0..=1, require_equals = true,
          default_missing_value = "bytes", value_enum, help_heading = "GPU staging")]
    pub verify: Option<VerifyArg>,
    /// Report the backend, library, GPU, chunk, slots and each file's route on stderr
    #[arg(long, help_heading = "Reporting")]
    pub debug: bool,
    /// Suppress warnings (such as falling back to host memory when no GPU library loads)
    #[arg(short, long, help_heading = "Reporting")]
    pub quiet: bool,
}

impl StagingArgs {
    /// Where progress goes: redrawn on stderr when it is a terminal (unless --no-progress);
    /// as plain lines when --progress asks for it off a terminal.
    pub fn progress_view(&self, stderr_is_terminal: bool) -> View {
        match (self.progress, self.no_progress, stderr_is_terminal) {
            (false, true, _) => View::Off,
            (keep, _, true) => View::Terminal { keep },
            (true, _, false) => View::Lines,
            (false, false, false) => View::Off,
        }
    }

    /// Warnings for GPU flags that `--backend host` cannot honour (given on the command
    /// line; never ignored silently).
    pub fn ignored_flags(&self, m: &clap::ArgMatches) -> Vec<String> {
        let given = |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        let mut warnings = Vec::new();
        if matches!(self.backend, BackendArg::Host) {
            if given("gpu") {
                warnings.push(format!(
                    "--gpu {} has no effect with --backend host: data is staged through host \
                     memory",
                    self.gpu
                ));
            }
            if given("route") {
                warnings.push(
                    "--route has no effect with --backend host: data is staged through host \
                     memory"
                        .to_owned(),
                );
            }
        }
        warnings
    }

    /// [`StagingArgs::progress_view`] for this process's stderr.
    pub fn progress_view_here(&self) -> View {
        self.progress_view(std::io::stderr().is_terminal())
    }
}

/// Parses a size: decimal or 0x hex, with an optional K, M, G, T suffix (powers of 1024,
/// also written KiB, MiB...) or KB, MB, GB, TB (powers of 1000), as dd and cp read them.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, suffix) = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))
    {
        let end = hex
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(hex.len());
        let n =
            u64::from_str_radix(&hex[..end], 16).map_err(|_| format!("'{text}' is not a size"))?;
        (n, &hex[end..])
    } else {
        let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let n = t[..end]
            .parse::<u64>()
            .map_err(|_| format!("'{text}' is not a size"))?;
        (n, &t[end..])
    };
    let multiplier: u64 = match suffix {
        "" | "B" => 1,
        "K" | "k" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "'{text}' has an unknown unit (use K, M, G, KiB, MB, ...)"
            ))
        }
    };
    digits
        .checked_mul(multiplier)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// `--gpu`: `N`, `N,M,...` (no repeats), `all` or `auto`. Indices are checked against the
/// device count when the backend comes up.
pub fn parse_gpu(text: &str) -> Result<GpuChoice, String> {
    match text {
        "all" => return Ok(GpuChoice::All),
        "auto" => return Ok(GpuChoice::Auto),
        _ => {}
    }
    let mut list: Vec<u32> = Vec::new();
    for part in text.split(',') {
        let index = match part.parse::<u32>() {
            Ok(i) if part.bytes().all(|b| b.is_ascii_digit()) => i,
            _ => {
                return Err(format!(
                    "'{part}' is not a GPU index (use N, a list such as 0,2,3, all or auto)"
                ))
            }
        };
        if list.contains(&index) {
            return Err(format!("GPU {index} is listed twice"));
        }
        list.push(index);
    }
    Ok(GpuChoice::List(list))
}

fn parse_chunk_size(text: &str) -> Result<ChunkSize, String> {
    ChunkSize::new(parse_size(text)?).map_err(|e| e.to_string())
}

/// The flags that ask `aiscp --serve` for `config`'s staging: backend, route, GPUs, slots
/// per GPU and chunk. Written beside the parser they must agree with: parsed back, they
/// give the same choices (the round trip is a test below).
pub fn service_args(config: &Config) -> Vec<String> {
    let backend = match config.backend {
        BackendChoice::Auto => BackendArg::Auto,
        BackendChoice::Gpu => BackendArg::Gpu,
        BackendChoice::HipFile => BackendArg::Hipfile,
        BackendChoice::CuFile => BackendArg::Cufile,
        BackendChoice::Host => BackendArg::Host,
    };
    let route = match config.route {
        RouteChoice::Auto => RouteArg::Auto,
        RouteChoice::Library => RouteArg::Library,
        RouteChoice::Bounce => RouteArg::Bounce,
    };
    let name = |v: Option<clap::builder::PossibleValue>| {
        v.expect("no value is skipped").get_name().to_owned()
    };
    let mut args = vec![
        format!("--backend={}", name(backend.to_possible_value())),
        format!("--route={}", name(route.to_possible_value())),
        format!("--gpu={}", config.gpu),
    ];
    if let Some(n) = config.slots_per_gpu {
        args.push(format!("--streams={n}"));
    }
    if let Some(chunk) = config.chunk_size {
        args.push(format!("--chunk-size={chunk}"));
    }
    args
}

impl From<&StagingArgs> for Config {
    fn from(a: &StagingArgs) -> Config {
        Config {
            backend: match a.backend {
                BackendArg::Auto => BackendChoice::Auto,
                BackendArg::Gpu => BackendChoice::Gpu,
                BackendArg::Hipfile => BackendChoice::HipFile,
                BackendArg::Cufile => BackendChoice::CuFile,
                BackendArg::Host => BackendChoice::Host,
            },
            chunk_size: a.chunk_size,
            gpu: a.gpu.clone(),
            route: match a.route {
                RouteArg::Auto => RouteChoice::Auto,
                RouteArg::Library => RouteChoice::Library,
                RouteArg::Bounce => RouteChoice::Bounce,
            },
            slots_per_gpu: a.streams.map(|n| n as usize),
            async_io: a.async_io,
            debug: a.debug,
            quiet: a.quiet,
            verify: a.verify.map(|v| match v {
                VerifyArg::Bytes => Verify::Bytes,
                VerifyArg::Sums => Verify::Sums,
            }),
            pause: crate::sys::test_hook::pause,
            ..Config::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_size, service_args, StagingArgs, View};
    use aiscp_engine::{BackendChoice, ChunkSize, Config, GpuChoice, RouteChoice};
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Only {
        #[command(flatten)]
        staging: StagingArgs,
    }

    fn error_text(args: &[&str]) -> String {
        let mut argv = vec!["aiscp"];
        argv.extend(args);
        Only::try_parse_from(argv).unwrap_err().to_string()
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        let e = error_text(&["--chunk-size", "0"]);
        assert!(
            e.contains("--chunk-size") && e.contains("must be between 1 and"),
            "{e}"
        );
        let e = error_text(&["--chunk-size", "0x7ffff001"]);
        assert!(e.contains("must be between 1 and 2147479552"), "{e}");
        let e = error_text(&["--chunk-size", "lots"]);
        assert!(e.contains("'lots' is not a size"), "{e}");
        let e = error_text(&["--streams", "0"]);
        assert!(e.contains("--streams"), "{e}");
        let e = error_text(&["--backend", "tpu"]);
        assert!(e.contains("tpu") && e.contains("hipfile"), "{e}");
        let e = error_text(&["--gpu", "two"]);
        assert!(
            e.contains("--gpu") && e.contains("'two' is not a GPU index"),
            "{e}"
        );
        let hint = " is not a GPU index (use N, a list such as 0,2,3, all or auto)";
        for (bad, why) in [
            ("0,,1", format!("''{hint}")),
            ("1,-2", format!("'-2'{hint}")),
            ("+1", format!("'+1'{hint}")),
            ("ALL", format!("'ALL'{hint}")),
            ("99999999999", format!("'99999999999'{hint}")),
            ("2,0,2", "GPU 2 is listed twice".to_owned()),
        ] {
            assert_eq!(super::parse_gpu(bad), Err(why), "{bad}");
        }
    }

    #[test]
    fn flags_reach_the_config() {
        let only = Only::try_parse_from([
            "aiscp",
            "--chunk-size",
            "1M",
            "--streams",
            "8",
            "--backend",
            "host",
            "--debug",
        ])
        .unwrap();
        let c = Config::from(&only.staging);
        assert_eq!(c.chunk_size.map(ChunkSize::bytes), Some(1 << 20));
        assert_eq!(c.slots_per_gpu, Some(8));
        assert_eq!(c.backend, BackendChoice::Host);
        assert!(c.debug);
        let view = |args: &[&str], tty| {
            let mut argv = vec!["aiscp"];
            argv.extend(args);
            Only::try_parse_from(argv)
                .unwrap()
                .staging
                .progress_view(tty)
        };
        assert_eq!(view(&["--progress", "--no-progress"], true), View::Off);
        assert_eq!(
            view(&["--no-progress", "--progress"], true),
            View::Terminal { keep: true }
        );
        assert_eq!(view(&["--no-progress", "--progress"], false), View::Lines);
        assert_eq!(view(&[], true), View::Terminal { keep: false });
        assert_eq!(view(&[], false), View::Off);
    }

    #[test]
    fn gpu_choices() {
        use aiscp_engine::GpuChoice;
        assert_eq!(super::parse_gpu("3"), Ok(GpuChoice::List(vec![3])));
        assert_eq!(
            super::parse_gpu("0,2,3"),
            Ok(GpuChoice::List(vec![0, 2, 3]))
        );
        assert_eq!(super::parse_gpu("2,0"), Ok(GpuChoice::List(vec![2, 0])));
        assert_eq!(super::parse_gpu("all"), Ok(GpuChoice::All));
        assert_eq!(super::parse_gpu("auto"), Ok(GpuChoice::Auto));
        let only = Only::try_parse_from(["aiscp"]).unwrap();
        assert_eq!(only.staging.gpu, GpuChoice::List(vec![0]));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("0x7ffff000"), Ok(0x7fff_f000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2MB"), Ok(2_000_000));
        assert!(parse_size("").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    /// What a client asks a service for parses back into the same staging choices.
    #[test]
    fn service_args_round_trip() {
        let backends = [
            BackendChoice::Auto,
            BackendChoice::Gpu,
            BackendChoice::HipFile,
            BackendChoice::CuFile,
            BackendChoice::Host,
        ];
        let routes = [RouteChoice::Auto, RouteChoice::Library, RouteChoice::Bounce];
        let gpus = [
            GpuChoice::default(),
            GpuChoice::List(vec![2, 0, 3]),
            GpuChoice::All,
            GpuChoice::Auto,
        ];
        let chunks = [
            None,
            Some(1 << 20),
            Some(3 << 30 >> 1),
            Some(0x7fff_f000),
            Some(4097),
        ];
        for (i, backend) in backends.into_iter().enumerate() {
            for (j, route) in routes.into_iter().enumerate() {
                let config = Config {
                    backend,
                    route,
                    gpu: gpus[(i + j) % gpus.len()].clone(),
                    slots_per_gpu: [None, Some(1), Some(256)][j % 3],
                    chunk_size: chunks[(i + 2 * j) % chunks.len()]
                        .map(|b: u64| ChunkSize::new(b).unwrap()),
                    ..Config::default()
                };
                let args = service_args(&config);
                let argv = std::iter::once("aiscp".to_owned()).chain(args.iter().cloned());
                let parsed = Config::from(&Only::try_parse_from(argv).unwrap().staging);
                assert_eq!(parsed.backend, config.backend, "{args:?}");
                assert_eq!(parsed.route, config.route, "{args:?}");
                assert_eq!(parsed.gpu, config.gpu, "{args:?}");
                assert_eq!(parsed.slots_per_gpu, config.slots_per_gpu, "{args:?}");
                assert_eq!(parsed.chunk_size, config.chunk_size, "{args:?}");
            }
        }
    }
}
