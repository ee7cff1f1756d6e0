//! Two real test users (`memgang-t-a`, `memgang-t-b`, made and removed
//! by the test) and requests to memgangd as them, for the tests of
//! hostile users (hostile.rs, hostile_bounds.rs).
//!
//! Requests as a user go through perl (perl-base, essential on Debian):
//! the socket learns the caller from the connecting process, so the
//! client must really run as that user.

#![allow(dead_code)]

use crate::common::daemon::{output_within, Daemon};
use crate::common::text;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub const USER_A: &str = "memgang-t-a";
pub const USER_B: &str = "memgang-t-b";

/// The two test users, removed when the test ends however it ends.
pub struct Users {
    pub a: (u32, u32),
    pub b: (u32, u32),
}

impl Users {
    pub fn new() -> Users {
        Users {
            a: add_user(USER_A),
            b: add_user(USER_B),
        }
    }
}

impl Drop for Users {
    fn drop(&mut self) {
        for name in [USER_A, USER_B] {
            let _ = Command::new("userdel").args(["-f", name]).output();
        }
    }
}

pub fn add_user(name: &str) -> (u32, u32) {
    // A user left by a run that was killed is reused.
    let _ = Command::new("useradd")
        .args(["--no-create-home", "--shell", "/usr/sbin/nologin", name])
        .output();
    let id = |flag: &str| -> u32 {
        let out = Command::new("id").args([flag, name]).output().unwrap();
        assert!(
            out.status.success(),
            "useradd {name} failed (is the passwd package installed?)"
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    (id("-u"), id("-g"))
}

impl Daemon {
    /// One raw request line as `user` (None: root); the answer.
    pub fn raw(&self, user: Option<(u32, u32)>, req: &Value) -> Value {
        let file = request_file(req);
        let mut c = Command::new("perl");
        c.args([
            "-MIO::Socket::UNIX",
            "-e",
            // A busy daemon answers and closes before it reads: no SIGPIPE.
            r#"$SIG{PIPE} = "IGNORE"; my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!";
               open(my $f, "<", $ARGV[1]) or die "$ARGV[1]: $!"; my $req = do { local $/; <$f> };
               print $s $req, "\n"; local $/; print scalar(<$s>);"#,
        ])
        .arg(self.socket())
        .arg(file.path());
        if let Some((uid, gid)) = user {
            c.uid(uid).gid(gid);
        }
        let out = output_within(c, Duration::from_secs(30));
        assert!(out.status.success(), "perl client: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("answer {e}: {}", text(&out)))
    }

    /// Submit as `user` with `cwd`; Ok(id) or the daemon's error message.
    pub fn submit(&self, user: (u32, u32), cwd: &Path, command: &[&str]) -> Result<u64, String> {
        let req = json!({
            "op": "submit", "command": command, "memory_bytes": 20u64 << 20,
            "ranks": 1, "cwd": cwd, "name": null,
            "env": {"PATH": "/usr/bin:/bin", "HOME": "/"},
        });
        let a = self.raw(Some(user), &req);
        match a["kind"].as_str() {
            Some("submitted") => Ok(a["id"].as_u64().unwrap()),
            _ => Err(a["message"].as_str().unwrap_or_default().to_string()),
        }
    }

    pub fn output(&self, id: u64) -> String {
        let a = self.raw(
            None,
            &json!({"op": "output", "id": id, "stream": "stdout", "offset": 0}),
        );
        a["data"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| a.to_string())
    }
}

pub fn wait_state(d: &Daemon, id: u64, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.job(id)["state"] != state {
        assert!(
            Instant::now() < deadline,
            "job {id} never {state}: {}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `req` in a file any user may read (a request can be larger than an
/// argument may: 128 KiB), removed when dropped.
pub fn request_file(req: &Value) -> tempfile::NamedTempFile {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(req.to_string().as_bytes()).unwrap();
    std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    f
}

/// Child processes killed when the test ends, passed or not.
pub struct Reap(pub Vec<Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
