//! The per-file work of cp: every decision about one SOURCE/DEST pair (same file, overwrite
//! rules, backups, links, directories, special files, attributes), with the file data handed
//! to the engine. Errors are printed where they happen and the run goes on; `Copier::failed`
//! tells `main` to exit 1.
//!
//! Every file is reached as a name inside an open directory ([`At`](crate::sys::open_dir::At)): SOURCE trees are walked
//! and DEST trees built through directory descriptors, so a directory swapped for a symlink
//! mid-run can't redirect a read or a write (see `open_dir`).

mod atomic;
mod copier;
mod create;
mod entry;
mod file;
mod inflight;
mod names;
mod parents;
mod pending;
mod prompt;
mod steps;
mod walk;

pub use copier::Copier;
