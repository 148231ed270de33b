//! The committed completion scripts, loaded into real bash, zsh and fish on a pseudo-terminal
//! and driven with TAB as a person would: what ends up on the command line is what the
//! shell would run. `aiscp` is a shell function there that prints its arguments, so pressing
//! Enter shows the completed line exactly.

use nix::pty::{openpty, Winsize};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    fn program(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Zsh => "zsh",
            Shell::Fish => "fish",
        }
    }

    fn args(self) -> &'static [&'static str] {
        match self {
            Shell::Bash => &["--norc", "--noprofile", "-i"],
            Shell::Zsh => &["-f", "-i"],
            Shell::Fish => &["--no-config", "-i"],
        }
    }

    /// Loads the committed script and defines `aiscp` as a function printing its arguments.
    /// Markers are quoted in two halves, so the terminal's echo of a command is never taken
    /// for its output.
    fn setup(self, root: &Path) -> String {
        let dir = root.join("completions");
        match self {
            Shell::Bash => format!(
                "PS1='$ '; source {}; aiscp() {{ printf 'AR''GS:%s\\n' \"$*\"; }}\n",
                dir.join("aiscp.bash").display()
            ),
            Shell::Zsh => format!(
                "PS1='$ '; fpath=({} $fpath); autoload -U compinit; compinit -u -D; \
                 aiscp() {{ printf 'AR''GS:%s\\n' \"$*\"; }}\n",
                dir.display()
            ),
            Shell::Fish => format!(
                "source {}; function aiscp; echo AR''GS:\"$argv\"; end\n",
                dir.join("aiscp.fish").display()
            ),
        }
    }

    fn installed(self) -> bool {
        Command::new(self.program())
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

/// An interactive shell on a pty, in `cwd`, with a fresh HOME.
struct Session {
    master: fs::File,
    output: mpsc::Receiver<Vec<u8>>,
    seen: Vec<u8>,
    child: std::process::Child,
}

impl Session {
    fn start(shell: Shell, cwd: &Path, home: &Path) -> Session {
        let ws = Winsize {
            ws_row: 40,
            ws_col: 200,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = openpty(Some(&ws), None).unwrap();
        let slave = || Stdio::from(pty.slave.try_clone().unwrap());
        let mut cmd = Command::new(shell.program());
        cmd.args(shell.args())
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("TERM", "xterm")
            .stdin(slave())
            .stdout(slave())
            .stderr(slave());
        // SAFETY: setsid and ioctl are async-signal-safe; the pty's slave is the child's
        // stdin, which becomes its controlling terminal, as a terminal emulator does.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()?;
                if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        drop(cmd);
        let master = fs::File::from(pty.master);
        let mut reader = master.try_clone().unwrap();
        let (tx, output) = mpsc::channel();
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        drop(pty.slave);
        Session {
            master,
            output,
            seen: Vec::new(),
            child,
        }
    }

    fn send(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).unwrap();
    }

    /// Waits until the shell has printed `marker` since the last call; returns what it printed
    /// before the marker.
    fn wait_for(&mut self, marker: &str, limit: Duration) -> Option<String> {
        let end = Instant::now() + limit;
        loop {
            let text = String::from_utf8_lossy(&self.seen).into_owned();
            if let Some(at) = text.find(marker) {
                self.seen.drain(..at + marker.len());
                return Some(text[..at].to_owned());
            }
            let left = end.checked_duration_since(Instant::now())?;
            match self.output.recv_timeout(left) {
                Ok(bytes) => self.seen.extend(bytes),
                Err(_) => return None,
            }
        }
    }

    /// Types `line` (TAB as `\t`), presses Enter, and returns the arguments `aiscp` got.
    fn complete(&mut self, line: &str) -> String {
        self.complete_showing(line, &[]).0
    }

    /// As [`Session::complete`], also saying whether the shell showed every word of `listed`
    /// (the candidates it lists) before Enter.
    fn complete_showing(&mut self, line: &str, listed: &[&str]) -> (String, bool) {
        // A marker first, so output of an earlier line cannot be taken for this one's.
        self.send("echo REA''DY\r");
        assert!(
            self.wait_for("READY\r\n", Duration::from_secs(20))
                .is_some(),
            "the shell did not answer: {:?}",
            String::from_utf8_lossy(&self.seen)
        );
        self.send(line);
        // Completion runs when the TAB is read, before the Enter behind it; the pause only
        // keeps fish from reading both as one paste.
        thread::sleep(Duration::from_millis(300));
        let shown = self.shows_all(listed, Duration::from_secs(5));
        self.send("\r");
        if self.wait_for("ARGS:", Duration::from_secs(20)).is_none() {
            panic!(
                "no ARGS for {line:?}: {:?}",
                String::from_utf8_lossy(&self.seen)
            );
        }
        let args = self.wait_for("\r\n", Duration::from_secs(20)).unwrap();
        (args.trim_end().to_owned(), shown)
    }

    /// Waits until everything printed since the last marker holds every word of `words`;
    /// consumes nothing, so the line's own output is still there to find.
    fn shows_all(&mut self, words: &[&str], limit: Duration) -> bool {
        let end = Instant::now() + limit;
        loop {
            let text = String::from_utf8_lossy(&self.seen);
            if words.iter().all(|w| text.contains(w)) {
                return true;
            }
            let Some(left) = end.checked_duration_since(Instant::now()) else {
                return false;
            };
            match self.output.recv_timeout(left) {
                Ok(bytes) => self.seen.extend(bytes),
                Err(_) => return false,
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `each` in every installed shell, on a session in a fresh directory holding `files`
/// (empty), with the committed script loaded, and fails with everything `each` found wrong.
fn in_each_shell(files: &[&str], mut each: impl FnMut(Shell, &mut Session, &mut Vec<String>)) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = Vec::new();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        if !shell.installed() {
            test_support::skip::skip(
                &format!("no {}", shell.program()),
                "the completion scripts are typed into it",
            );
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("cwd");
        let home = dir.path().join("home");
        fs::create_dir_all(&cwd).unwrap();
        fs::create_dir_all(&home).unwrap();
        for file in files {
            fs::write(cwd.join(file), "").unwrap();
        }
        let mut session = Session::start(shell, &cwd, &home);
        session.send(&shell.setup(root));
        each(shell, &mut session, &mut wrong);
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn completions_lead_to_lines_cp_accepts() {
    // Operands whose names start like the options' values.
    in_each_shell(&["jfile", "olfile"], |shell, session, wrong| {
        for (typed, want) in [
            // An optional value is completed after '=' ...
            ("aiscp --stats=j\t", "--stats=json"),
            ("aiscp --update=ol\t", "--update=older"),
            ("aiscp --backup=num\t", "--backup=numbered"),
            // ... and never as the next word, which getopt takes for an operand.
            ("aiscp --stats j\t", "--stats jfile"),
            ("aiscp --update ol\t", "--update olfile"),
            // A required value either way.
            ("aiscp --sparse=al\t", "--sparse=always"),
            ("aiscp --sparse al\t", "--sparse always"),
            // Hidden options are not offered.
            ("aiscp --gener\t", "--gener"),
        ] {
            let got = session.complete(typed);
            if got != want {
                wrong.push(format!(
                    "{}: {typed:?} gave {got:?}, not {want:?}",
                    shell.program()
                ));
            }
        }
    });
}

/// An empty word completes file names, never options (all of which start with '-', so
/// offering them puts a lone '-' on the line), wherever it stands.
#[test]
fn empty_word_completes_file_names() {
    in_each_shell(&["only.txt"], |shell, session, wrong| {
        for (typed, want) in [
            ("aiscp \t", "only.txt"),
            ("aiscp -r small \t", "-r small only.txt"),
            (
                "aiscp -r --stats=json small \t",
                "-r --stats=json small only.txt",
            ),
            // Options still, once the word starts with '-'.
            ("aiscp -r small --recur\t", "-r small --recursive"),
        ] {
            let got = session.complete(typed);
            if got != want {
                wrong.push(format!(
                    "{}: {typed:?} gave {got:?}, not {want:?}",
                    shell.program()
                ));
            }
        }
    });
}

/// Right after `--opt=` the shell offers that option's values (listed, as there are several)
/// and inserts nothing else: not a '-' (bash splits the word at '=', and offering options
/// there gave `--stats=-`), not a file name.
#[test]
fn empty_value_after_equals_lists_the_values() {
    in_each_shell(&["only.txt"], |shell, session, wrong| {
        for (option, values) in [
            ("stats", &["json", "text"][..]),
            ("update", &["none-fail", "older"]),
            ("backup", &["numbered", "existing"]),
            ("preserve", &["timestamps", "ownership"]),
            ("no-preserve", &["timestamps", "ownership"]),
            ("reflink", &["always", "never"]),
            ("sparse", &["always", "never"]),
            ("route", &["library", "bounce"]),
        ] {
            // bash lists the candidates on the second TAB; zsh lists them on the first,
            // and a second would start its menu, inserting one.
            let tabs = match shell {
                Shell::Bash => "\t\t",
                Shell::Zsh | Shell::Fish => "\t",
            };
            let typed = format!("aiscp -r small --{option}={tabs}");
            let (got, shown) = session.complete_showing(&typed, values);
            let want = format!("-r small --{option}=");
            if got != want || !shown {
                wrong.push(format!(
                    "{}: {typed:?} gave {got:?} (want {want:?}), values {values:?} {}",
                    shell.program(),
                    if shown { "listed" } else { "not listed" }
                ));
            }
        }
    });
}
