//! How a job touching its memory at random faults itself back in after
//! another job ran in its place, on this kernel's LRU: gang `lru` on one
//! node, slowed down enough to watch. Two processes of MIB MiB each touch
//! every page once per pass in a random order (as memgang-workload
//! `--pattern random`) inside one memory cgroup of POOL MiB, with swap;
//! they take turns of PASSES passes each (the other one waits on a pipe,
//! touching nothing, as if frozen). Each turn after the first two prints
//! the pages the resumed job lacked (not resident at its resume) and its
//! major faults as it goes, per tenth of a pass, beside what a strict LRU
//! gives a random order (`lack · (1 + ln(mem / lack))` in its first pass,
//! none after). With SEPARATE=1 each process is in a group of its own
//! under the pool, as memgang runs jobs: the pool's reclaim then walks
//! both groups' LRUs, not one. Run as root by `bench/refill.sh`.
//!
//!   refill [MIB] [POOL] [PASSES] [TURNS]     (defaults 700, 1024, 2, 6)

use memgang_linux::cgroup::spawn_into;
use memgang_linux::cgroup::{self, CgroupBackend, GroupPath};
use memgang_linux::paging::{self, page_size};
use memgang_linux::runs;
use memgang_linux::swap::TestSwap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

const MIB: u64 = 1 << 20;
/// Reports per pass: enough to see the curve's shape.
const STEPS: u64 = 10;

/// The child: maps and fills `mib` on small pages when told `g`, prints
/// its address; on `t N`, touches N passes in a random order (a new
/// permutation each pass), printing after every tenth of a pass the
/// touches done, its major faults so far and the nanoseconds since.
fn child(mib: u64, seed: u64) {
    let page = page_size() as usize;
    let pages = (mib * MIB) as usize / page;
    let mut lines = std::io::stdin().lock().lines();
    let mut out = std::io::stdout().lock();
    assert_eq!(lines.next().unwrap().unwrap(), "g");
    // SAFETY: a private anonymous mapping of our own.
    let mem = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            pages * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(mem, libc::MAP_FAILED);
    // SAFETY: the mapping above, its length.
    unsafe { libc::madvise(mem, pages * page, libc::MADV_NOHUGEPAGE) };
    let bytes = mem.cast::<u8>();
    for i in 0..pages {
        // SAFETY: inside the mapping; never zero, so swap keeps the page.
        unsafe { bytes.add(i * page).write_volatile((i % 251 + 1) as u8) };
    }
    let mut order: Vec<u32> = (0..pages as u32).collect();
    // Locked, so that only the job's memory faults.
    // SAFETY: the vector's own buffer.
    unsafe { libc::mlock(order.as_ptr().cast(), pages * 4) };
    writeln!(out, "{}", mem as u64).unwrap();
    out.flush().unwrap();
    let mut x = seed | 1;
    let majflt = || {
        // SAFETY: getrusage fills the zeroed struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        ru.ru_majflt as u64
    };
    let mut sum = 0u8;
    while let Some(Ok(cmd)) = lines.next() {
        let v: Vec<u64> = cmd
            .strip_prefix("t ")
            .unwrap()
            .split(' ')
            .map(|x| x.parse().unwrap())
            .collect();
        // Passes at most; seconds (0: no limit); CPU ns spent per touch.
        let (passes, limit_ms, compute_ns) = (v[0], v[1], v[2]);
        let (t0, f0) = (Instant::now(), majflt());
        let mut touched = 0u64;
        let step = pages as u64 / STEPS;
        'passes: for p in 0..passes {
            for i in (1..pages).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
            for (k, &i) in order.iter().enumerate() {
                // SAFETY: inside the mapping.
                sum = sum.wrapping_add(unsafe { bytes.add(i as usize * page).read_volatile() });
                if compute_ns > 0 {
                    let c = Instant::now();
                    while (c.elapsed().as_nanos() as u64) < compute_ns {
                        std::hint::spin_loop();
                    }
                }
                touched += 1;
                if limit_ms > 0
                    && touched.is_multiple_of(256)
                    && t0.elapsed().as_millis() as u64 >= limit_ms
                {
                    writeln!(
                        out,
                        "cut {touched} {} {}",
                        majflt() - f0,
                        t0.elapsed().as_nanos()
                    )
                    .unwrap();
                    break 'passes;
                }
                let done = k as u64 + 1;
                if done.is_multiple_of(step) {
                    writeln!(
                        out,
                        "{} {} {}",
                        p * pages as u64 + done,
                        majflt() - f0,
                        t0.elapsed().as_nanos()
                    )
                    .unwrap();
                }
            }
        }
        writeln!(out, "end {sum}").unwrap();
        out.flush().unwrap();
    }
}

struct Job {
    proc: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    region: std::ops::Range<u64>,
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("child") {
        args.next();
        let mib = args.next().unwrap().parse().unwrap();
        let seed = args.next().unwrap().parse().unwrap();
        return child(mib, seed);
    }
    let mut num = |default: u64, what: &str| {
        args.next().map_or(default, |a| {
            a.parse().unwrap_or_else(|_| panic!("{what}: a number"))
        })
    };
    let (mib, pool, passes, turns) = (
        num(700, "MIB"),
        num(1024, "POOL"),
        num(2, "PASSES"),
        num(6, "TURNS"),
    );
    let backend: Box<dyn CgroupBackend> =
        cgroup::detect().expect("a cgroup memory hierarchy (run as root)");
    let _swap = TestSwap::new(2 * mib * MIB + 512 * MIB).expect("a swap file (run as root)");
    let group = GroupPath::new(&format!("memgang-bench-refill-{}", std::process::id())).unwrap();
    backend.create(&group).unwrap();
    struct Remove<'a>(&'a dyn CgroupBackend, &'a GroupPath);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            for child in ["a", "b"] {
                let _ = self.0.remove(&self.1.join(child).unwrap());
            }
            let _ = self.0.remove(self.1);
        }
    }
    let _remove = Remove(backend.as_ref(), &group);
    backend.set_memory_limit(&group, Some(pool * MIB)).unwrap();
    let page = page_size();
    let pages = mib * MIB / page;
    let separate = std::env::var("SEPARATE").is_ok_and(|v| v == "1");
    // QUANTUM_S: a turn also ends after this many seconds (gang's
    // quantum); COMPUTE_US: CPU per page touched (memgang-workload's
    // random pairs spend 0.645 s per pass over 700 MiB, 3.6 us a page).
    let env_f = |k: &str| std::env::var(k).ok().map(|v| v.parse::<f64>().expect(k));
    let quantum_ms = env_f("QUANTUM_S").map_or(0, |s| (s * 1e3) as u64);
    let compute_ns = env_f("COMPUTE_US").map_or(0, |u| (u * 1e3) as u64);
    let mut jobs: Vec<Job> = (0..2u64)
        .map(|i| {
            let home = if separate {
                let g = group.join(if i == 0 { "a" } else { "b" }).unwrap();
                backend.create(&g).unwrap();
                g
            } else {
                group.clone()
            };
            let mut proc = spawn_into(
                backend.as_ref(),
                &home,
                Command::new(std::env::current_exe().unwrap())
                    .args(["child", &mib.to_string(), &(i + 1).to_string()])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped()),
            )
            .unwrap()
            .unwrap();
            let input = proc.stdin.take().unwrap();
            let output = BufReader::new(proc.stdout.take().unwrap());
            Job {
                proc,
                input,
                output,
                region: 0..0,
            }
        })
        .collect();
    println!(
        "{:<5} {:>4} {:>6} {:>9} {:>9} {:>10} {:>8}  faulted MiB at each tenth of the pass (cumulative)",
        "turn", "job", "pass", "lack_MiB", "LRU_MiB", "faults_MiB", "secs"
    );
    for turn in 0..turns {
        let k = (turn % 2) as usize;
        let job = &mut jobs[k];
        let pid = job.proc.id() as i32;
        if turn < 2 {
            writeln!(job.input, "g").unwrap();
            let mut line = String::new();
            job.output.read_line(&mut line).unwrap();
            let at: u64 = line.trim().parse().unwrap();
            job.region = at..at + pages * page;
        }
        let resident = runs::bytes(
            &paging::resident_runs(pid, std::slice::from_ref(&job.region))
                .unwrap()
                .0,
        );
        let lack = (pages * page).saturating_sub(resident) as f64 / page as f64;
        let lru = if lack >= 1.0 {
            lack * (1.0 + (pages as f64 / lack).ln())
        } else {
            0.0
        };
        writeln!(job.input, "t {passes} {quantum_ms} {compute_ns}").unwrap();
        let mut row: Vec<f64> = Vec::new();
        let mut pass_faults = 0u64;
        // Cut by the quantum: the lines left of the turn are not a pass.
        let mut cut = false;
        let to_mib = |f: u64| f as f64 * page as f64 / MIB as f64;
        loop {
            let mut line = String::new();
            job.output.read_line(&mut line).unwrap();
            if line.starts_with("end") {
                break;
            }
            if let Some(rest) = line.strip_prefix("cut ") {
                // A quantum by time: one row for the turn, the pass part
                // done as a fraction.
                let v: Vec<u64> = rest
                    .split_whitespace()
                    .map(|x| x.parse().unwrap())
                    .collect();
                println!(
                    "{turn:<5} {:>4} {:>6.2} {:>9.0} {:>9.0} {:>10.0} {:>8.2}  (cut by the quantum)",
                    if k == 0 { "a" } else { "b" },
                    v[0] as f64 / pages as f64,
                    to_mib(lack as u64),
                    to_mib(lru as u64),
                    to_mib(v[1]),
                    v[2] as f64 / 1e9
                );
                cut = true;
                continue;
            }
            if cut {
                continue;
            }
            let v: Vec<u64> = line
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            let (done, faults, ns) = (v[0], v[1], v[2]);
            row.push(to_mib(faults - pass_faults));
            let secs = ns as f64 / 1e9;
            if done % pages == 0 {
                let p = done / pages;
                let cells: Vec<String> = row.iter().map(|m| format!("{m:.0}")).collect();
                println!(
                    "{turn:<5} {:>4} {p:>6} {:>9.0} {:>9.0} {:>10.0} {secs:>8.2}  {}",
                    if k == 0 { "a" } else { "b" },
                    if p == 1 { to_mib(lack as u64) } else { 0.0 },
                    if p == 1 { to_mib(lru as u64) } else { 0.0 },
                    row.last().copied().unwrap_or(0.0),
                    cells.join(" ")
                );
                pass_faults = faults;
                row.clear();
            }
        }
    }
}
