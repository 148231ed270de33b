//! cp's rules: what the command line asks for (`options`), which SOURCE goes to which DEST
//! (`plan`), and every decision about one file on the way (`copy`, with `same_file`,
//! `backup` and `attrs`), down to the digests manifest of what was copied (`sums`).

pub mod attrs;
pub mod backup;
pub mod copy;
pub mod options;
pub mod plan;
pub mod same_file;
pub mod sums;
