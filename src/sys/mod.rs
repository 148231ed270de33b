//! The system underneath cp's rules: directories reached by descriptor (`open_dir`), what
//! stat says (`stat`), signals, waiting on a descriptor (`fd_wait`), the lines written to
//! stdout and stderr (`messages`), and the pause tests race against (`test_hook`).

pub mod fd_wait;
pub mod messages;
pub mod open_dir;
pub mod signals;
pub mod stat;
pub mod test_hook;
