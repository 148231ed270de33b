//! aiscp's copy engine: moves file data through GPU memory (or host memory where no GPU
//! library loads). Knows nothing of the command line: `main` builds an [`engine::Config`].

pub mod backend;
pub mod engine;
pub mod quote;
