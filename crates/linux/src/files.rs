//! Files a root service makes where another user may write too (node
//! exporter's textfile directory, a socket's directory, a job's files):
//! every name is opened from its directory's descriptor and never
//! through a link, so no path of root's follows a link a user planted.
//! The directory itself is the caller's to trust (its path may hold
//! links an administrator made, e.g. /var/run); inside it only the names
//! given are touched.

use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fchmod, mkdirat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// An open directory: what is made, replaced or removed in it is named
/// relative to it, with no link followed.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

fn io(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

fn mode(m: u32) -> Mode {
    Mode::from_bits_truncate(m as libc::mode_t)
}

impl Dir {
    /// The directory at `path`; a link as its last component is refused
    /// (ELOOP or ENOTDIR).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let fd = openat(
            None,
            path,
            OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_RDONLY,
            Mode::empty(),
        )
        .map_err(io)?;
        // SAFETY: a descriptor just opened, ours alone.
        Ok(Dir {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn open_in(&self, name: &str, flags: OFlag, m: u32) -> io::Result<OwnedFd> {
        let fd = openat(
            Some(self.fd.as_raw_fd()),
            name,
            flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            mode(m),
        )
        .map_err(io)?;
        // SAFETY: a descriptor just opened, ours alone.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// A new file `name` (none may be there, not even a link), for
    /// writing, with mode `m` whatever the umask.
    pub fn create_new(&self, name: &str, m: u32) -> io::Result<File> {
        let fd = self.open_in(name, OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY, m)?;
        fchmod(fd.as_raw_fd(), mode(m)).map_err(io)?;
        Ok(File::from(fd))
    }

    /// Replace `name` with `bytes` at once (a reader sees the old file or
    /// the new one, whole): written to the new file `tmp` (a link or file
    /// there is removed first, never followed), given mode `m`, synced if
    /// `sync`, and renamed over `name` (a link at `name` is replaced, not
    /// followed). On failure `tmp` is removed.
    pub fn replace(
        &self,
        name: &str,
        tmp: &str,
        bytes: &[u8],
        m: u32,
        sync: bool,
    ) -> io::Result<()> {
        self.remove(tmp)?;
        let write = || -> io::Result<()> {
            let mut f = self.create_new(tmp, m)?;
            f.write_all(bytes)?;
            if sync {
                f.sync_all()?;
            }
            renameat(
                Some(self.fd.as_raw_fd()),
                tmp,
                Some(self.fd.as_raw_fd()),
                name,
            )
            .map_err(io)
        };
        write().inspect_err(|_| {
            let _ = self.remove(tmp);
        })
    }

    /// Remove the file (or link) `name`; one that is not there is fine.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        match unlinkat(Some(self.fd.as_raw_fd()), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => Ok(()),
            Err(e) => Err(io(e)),
        }
    }

    /// The directory `name` in this one, made with mode `m` if it is not
    /// there (`made`: true); one that is there keeps its mode. A link is
    /// refused.
    pub fn make_dir(&self, name: &str, m: u32) -> io::Result<(Dir, bool)> {
        let made = match mkdirat(Some(self.fd.as_raw_fd()), name, mode(0o700)) {
            Ok(()) => true,
            Err(nix::errno::Errno::EEXIST) => false,
            Err(e) => return Err(io(e)),
        };
        let fd = self.open_in(name, OFlag::O_DIRECTORY | OFlag::O_RDONLY, 0)?;
        if made {
            fchmod(fd.as_raw_fd(), mode(m)).map_err(io)?;
        }
        Ok((Dir { fd }, made))
    }

    /// Set this directory's mode (one the caller owns).
    pub fn set_mode(&self, m: u32) -> io::Result<()> {
        fchmod(self.fd.as_raw_fd(), mode(m)).map_err(io)
    }

    /// Set the mode of `name` in this directory, which must not be a
    /// link: a link planted there is refused, not followed.
    pub fn set_mode_of(&self, name: &str, m: u32) -> io::Result<()> {
        nix::sys::stat::fchmodat(
            Some(self.fd.as_raw_fd()),
            name,
            mode(m),
            nix::sys::stat::FchmodatFlags::NoFollowSymlink,
        )
        .map_err(io)
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Make the directory `path` and whatever of its parents is missing,
/// each one made given mode `m`; what was there keeps its mode (a
/// directory an administrator made, e.g. a sticky /tmp, is left as it
/// is). Each is made from its parent's descriptor and opened without
/// following a link. Returns the directory and whether it was made.
pub fn make_dirs(path: &Path, m: u32) -> io::Result<(Dir, bool)> {
    // The deepest part that exists is opened as it is (links an
    // administrator made in it are followed); below it nothing is.
    let mut existing = PathBuf::from(path);
    let mut missing: Vec<String> = Vec::new();
    while !existing.exists() {
        let Some(name) = existing.file_name() else {
            break;
        };
        missing.push(name.to_string_lossy().into_owned());
        if !existing.pop() {
            break;
        }
    }
    if existing.as_os_str().is_empty() {
        existing = PathBuf::from(".");
    }
    if missing.is_empty() {
        return Ok((Dir::open(path)?, false));
    }
    let fd = openat(
        None,
        &existing,
        OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_RDONLY,
        Mode::empty(),
    )
    .map_err(io)?;
    // SAFETY: a descriptor just opened, ours alone.
    let mut dir = Dir {
        fd: unsafe { OwnedFd::from_raw_fd(fd) },
    };
    let mut made = false;
    for name in missing.iter().rev() {
        if Path::new(name).components().next() != Some(Component::Normal(name.as_ref())) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: {name:?} is not a directory name", path.display()),
            ));
        }
        (dir, made) = dir.make_dir(name, m)?;
    }
    Ok((dir, made))
}

/// The directory of `path` and its last component: where a file at
/// `path` is made through [`Dir`].
pub fn split(path: &Path) -> io::Result<(PathBuf, String)> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a file name", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_string()))
}

/// Replace the file at `path` with `bytes` and mode `m` ([`Dir::replace`]
/// in its directory, the temporary file named `<name>.tmp`).
pub fn replace(path: &Path, bytes: &[u8], m: u32) -> io::Result<()> {
    let (dir, name) = split(path)?;
    Dir::open(&dir)?.replace(&name, &format!("{name}.tmp"), bytes, m, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn replace_follows_no_link_and_sets_the_mode() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "root's\n").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Links planted at both the name and its temporary name.
        std::os::unix::fs::symlink(&victim, d.path().join("m.prom")).unwrap();
        std::os::unix::fs::symlink(&victim, d.path().join("m.prom.tmp")).unwrap();
        let dir = Dir::open(d.path()).unwrap();
        dir.replace("m.prom", "m.prom.tmp", b"new\n", 0o644, true)
            .unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's\n");
        assert_eq!(
            std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let m = std::fs::symlink_metadata(d.path().join("m.prom")).unwrap();
        assert!(m.is_file());
        assert_eq!(m.mode() & 0o777, 0o644);
        assert_eq!(
            std::fs::read_to_string(d.path().join("m.prom")).unwrap(),
            "new\n"
        );
        assert!(!d.path().join("m.prom.tmp").exists());
        replace(&d.path().join("m.prom"), b"again\n", 0o644).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("m.prom")).unwrap(),
            "again\n"
        );
        // A link as the directory's last component is refused.
        std::os::unix::fs::symlink(d.path(), d.path().join("link")).unwrap();
        assert!(Dir::open(&d.path().join("link")).is_err());
        // Nor is a mode set through a link.
        std::os::unix::fs::symlink(&victim, d.path().join("sock")).unwrap();
        assert!(dir.set_mode_of("sock", 0o666).is_err());
        assert_eq!(
            std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn make_dirs_sets_the_mode_of_what_it_makes_only() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path().join("sticky");
        std::fs::create_dir(&top).unwrap();
        std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let (_, made) = make_dirs(&top.join("a/b"), 0o755).unwrap();
        assert!(made);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&top), 0o1777);
        assert_eq!(mode(&top.join("a")), 0o755);
        assert_eq!(mode(&top.join("a/b")), 0o755);
        let (_, made) = make_dirs(&top, 0o755).unwrap();
        assert!(!made);
        assert_eq!(mode(&top), 0o1777);
        let (dir, made) = Dir::open(&top).unwrap().make_dir("a", 0o700).unwrap();
        assert!(!made);
        assert_eq!(mode(&top.join("a")), 0o755);
        let f = dir.create_new("f", 0o600).unwrap();
        drop(f);
        assert!(dir.create_new("f", 0o600).is_err(), "made twice");
        assert_eq!(mode(&top.join("a/f")), 0o600);
    }
}
