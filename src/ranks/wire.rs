//! What the ranks send each other, as bytes: rank 0's tasks and the other ranks' answers.
//! Both ends are this same program, so the format is private and a malformed message is a
//! bug (the decoder panics).

use aiscp_engine::{PartEnd, SparseMode};
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Rank 0 to a rank: a [`Task`].
pub const TASK: i32 = 1;
/// A rank to rank 0: a [`Reply`] to a task.
pub const DONE: i32 = 2;
/// A rank to rank 0, once at the start: [`Outcome::Copied`] (its engine is up) or
/// [`Outcome::NoEngine`].
pub const HELLO: i32 = 3;

/// The two files of a task, as rank 0 opened them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Files {
    /// Where rank 0 opened them, and their inodes, to check the same ones are found.
    pub src_path: PathBuf,
    pub dst_path: PathBuf,
    /// The names cp's messages use.
    pub src_name: PathBuf,
    pub dst_name: PathBuf,
    pub src_ino: u64,
    pub dst_ino: u64,
    pub sparse: SparseMode,
}

/// What rank 0 sends.
#[derive(Debug, PartialEq, Eq)]
pub enum Task {
    Stop,
    /// The aligned slices of bytes `part` of a file cut into parts (rank 0 ends the file:
    /// its tail and DST's size).
    Part {
        id: u64,
        files: Files,
        part: Range<u64>,
    },
    /// A whole file, copied as one process copies a file in flight: DST cut first when
    /// `truncate`, its final size set, closed before the answer.
    Whole {
        id: u64,
        files: Files,
        len: u64,
        truncate: bool,
    },
}

/// How a task ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Copied up to this end (SOURCE may have ended early or grown).
    Copied(u64),
    /// A part's slices copied, as far as they went (rank 0 ends the file).
    Part(PartEnd),
    /// Failed; cp's message (without the program's name).
    Failed(String),
    /// The run was stopped; `started`: DST was touched.
    Interrupted { started: bool },
    /// The rank's engine could not start (fatal for the run, as in one process); why.
    NoEngine(String),
    /// SOURCE or DEST is not at the path rank 0 opened it by, as this rank sees it: moved
    /// or replaced since (rank 0 then copies it through the descriptors it holds, as one
    /// process would), or this rank sees another filesystem (the failure, in these words).
    Moved(String),
}

/// A rank's answer to the task `id`.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    pub id: u64,
    pub outcome: Outcome,
}

impl Task {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        match self {
            Task::Stop => e.u8(0),
            Task::Part { id, files, part } => {
                e.u8(1);
                e.u64(*id);
                e.files(files);
                e.u64(part.start);
                e.u64(part.end);
            }
            Task::Whole {
                id,
                files,
                len,
                truncate,
            } => {
                e.u8(2);
                e.u64(*id);
                e.files(files);
                e.u64(*len);
                e.u8(u8::from(*truncate));
            }
        }
        e.0
    }

    pub fn decode(bytes: &[u8]) -> Task {
        let mut d = Decoder(bytes);
        match d.u8() {
            0 => Task::Stop,
            1 => {
                let (id, files) = (d.u64(), d.files());
                let (start, end) = (d.u64(), d.u64());
                Task::Part {
                    id,
                    files,
                    part: start..end,
                }
            }
            _ => Task::Whole {
                id: d.u64(),
                files: d.files(),
                len: d.u64(),
                truncate: d.u8() == 1,
            },
        }
    }
}

impl Outcome {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.outcome(self);
        e.0
    }

    pub fn decode(bytes: &[u8]) -> Outcome {
        Decoder(bytes).outcome()
    }
}

impl Reply {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.u64(self.id);
        e.outcome(&self.outcome);
        e.0
    }

    pub fn decode(bytes: &[u8]) -> Reply {
        let mut d = Decoder(bytes);
        Reply {
            id: d.u64(),
            outcome: d.outcome(),
        }
    }
}

/// Little-endian numbers and length-prefixed byte strings.
#[derive(Default)]
struct Encoder(Vec<u8>);

impl Encoder {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn files(&mut self, f: &Files) {
        for p in [&f.src_path, &f.dst_path, &f.src_name, &f.dst_name] {
            self.bytes(p.as_os_str().as_bytes());
        }
        self.u64(f.src_ino);
        self.u64(f.dst_ino);
        self.u8(match f.sparse {
            SparseMode::Auto => 0,
            SparseMode::Never => 1,
            SparseMode::Always => 2,
        });
    }
    fn outcome(&mut self, o: &Outcome) {
        match o {
            Outcome::Copied(end) => {
                self.u8(0);
                self.u64(*end);
            }
            Outcome::Failed(why) => {
                self.u8(1);
                self.bytes(why.as_bytes());
            }
            Outcome::Interrupted { started } => {
                self.u8(2);
                self.u8(u8::from(*started));
            }
            Outcome::NoEngine(why) => {
                self.u8(3);
                self.bytes(why.as_bytes());
            }
            Outcome::Moved(why) => {
                self.u8(4);
                self.bytes(why.as_bytes());
            }
            Outcome::Part(end) => {
                self.u8(5);
                self.u8(u8::from(end.good.is_some()));
                self.u64(end.good.unwrap_or(0));
                self.u8(u8::from(end.whole));
                self.u64(end.holes.len() as u64);
                for hole in &end.holes {
                    self.u64(hole.start);
                    self.u64(hole.end);
                }
            }
        }
    }
}

/// Reads what [`Encoder`] wrote.
struct Decoder<'a>(&'a [u8]);

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().expect("8 bytes"))
    }
    fn bytes(&mut self) -> Vec<u8> {
        let n = self.u64() as usize;
        self.take(n).to_vec()
    }
    fn text(&mut self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }
    fn path(&mut self) -> PathBuf {
        PathBuf::from(std::ffi::OsStr::from_bytes(&self.bytes()))
    }
    fn files(&mut self) -> Files {
        Files {
            src_path: self.path(),
            dst_path: self.path(),
            src_name: self.path(),
            dst_name: self.path(),
            src_ino: self.u64(),
            dst_ino: self.u64(),
            sparse: match self.u8() {
                1 => SparseMode::Never,
                2 => SparseMode::Always,
                _ => SparseMode::Auto,
            },
        }
    }
    fn outcome(&mut self) -> Outcome {
        match self.u8() {
            0 => Outcome::Copied(self.u64()),
            1 => Outcome::Failed(self.text()),
            2 => Outcome::Interrupted {
                started: self.u8() == 1,
            },
            3 => Outcome::NoEngine(self.text()),
            4 => Outcome::Moved(self.text()),
            _ => {
                let some = self.u8() == 1;
                let good = self.u64();
                let whole = self.u8() == 1;
                let holes = (0..self.u64()).map(|_| self.u64()..self.u64()).collect();
                // A rank's digest pieces stay with it: the file's end reads DEST back.
                Outcome::Part(PartEnd {
                    good: some.then_some(good),
                    whole,
                    holes,
                    pieces: Vec::new(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Files {
        Files {
            src_path: PathBuf::from("/data/in/\u{e9}t\u{e9} \n x"),
            dst_path: PathBuf::from(std::ffi::OsStr::from_bytes(b"/out/\xff\xfe")),
            src_name: PathBuf::from("in/x"),
            dst_name: PathBuf::from(""),
            src_ino: u64::MAX,
            dst_ino: 12,
            sparse: SparseMode::Always,
        }
    }

    #[test]
    fn tasks_survive_the_wire() {
        let tasks = [
            Task::Stop,
            Task::Part {
                id: 7,
                files: files(),
                part: (3 << 30)..(5 << 30) + 17,
            },
            Task::Whole {
                id: u64::MAX - 1,
                files: Files {
                    sparse: SparseMode::Never,
                    ..files()
                },
                len: 4097,
                truncate: true,
            },
            Task::Whole {
                id: 0,
                files: Files {
                    sparse: SparseMode::Auto,
                    ..files()
                },
                len: 0,
                truncate: false,
            },
        ];
        for task in tasks {
            assert_eq!(Task::decode(&task.encode()), task);
        }
        assert_eq!(
            files().dst_path.as_os_str().as_bytes(),
            b"/out/\xff\xfe",
            "a name that is not UTF-8 keeps its bytes"
        );
    }

    #[test]
    fn replies_survive_the_wire() {
        for outcome in [
            Outcome::Copied(u64::MAX),
            Outcome::Part(PartEnd {
                good: None,
                whole: false,
                holes: Vec::new(),
                pieces: Vec::new(),
            }),
            Outcome::Part(PartEnd {
                good: Some(u64::MAX),
                whole: true,
                holes: vec![0..4096, 1 << 20..u64::MAX],
                pieces: Vec::new(),
            }),
            Outcome::Failed("cannot open 'a\u{e9}' for reading: Permission denied".into()),
            Outcome::Interrupted { started: false },
            Outcome::Interrupted { started: true },
            Outcome::NoEngine(String::new()),
            Outcome::Moved("rank 1: 'a' is not the file rank 0 opened".into()),
        ] {
            let hello = Outcome::decode(&outcome.encode());
            let reply = Reply { id: 99, outcome };
            assert_eq!(Reply::decode(&reply.encode()), reply);
            assert_eq!(hello, reply.outcome);
        }
    }
}
