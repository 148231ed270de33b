//! Flags that choose how data is staged through the GPU (owned with the engine, issue 3/5/6).

use aiscp::engine::{BackendChoice, Config};
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BackendArg {
    Auto,
    Gpu,
    Hipfile,
    Cufile,
    Host,
}

#[derive(Args, Debug, Clone)]
pub struct StagingArgs {
    /// Staging backend: auto tries hipFile, then cuFile, then host memory
    #[arg(
        long,
        value_enum,
        env = "AISCP_BACKEND",
        default_value = "auto",
        help_heading = "GPU staging"
    )]
    pub backend: BackendArg,
    /// GPU index to stage through
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        help_heading = "GPU staging"
    )]
    pub gpu: u32,
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
            chunk_size: None,
            gpu: a.gpu,
            streams: None,
            async_io: false,
            verify: false,
            debug: false,
            quiet: false,
        }
    }
}
