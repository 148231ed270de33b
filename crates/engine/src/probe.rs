//! What `--doctor` asks of the engine without a run: the facts the engine decides its route
//! by, so that the report and a copy can't disagree.

use crate::backend::{resolve_route, Request};
use hipfile::Flavor;

pub use crate::backend::gpu::{refusal_bounces, NVIDIA_FS};
pub use crate::backend::library_paths::{compiler_path, library_paths};
pub use crate::backend::LIBRARY_FROM;

/// Whether registered files take the library route on `flavor` under `--route auto` (no
/// `--async`), and why.
pub fn auto_route(flavor: Flavor) -> (bool, &'static str) {
    resolve_route(flavor, &Request::default())
}
