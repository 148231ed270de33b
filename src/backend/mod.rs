//! Staging backends: where a chunk lives between its read and its write (issue 3).
