//! memgang.toml's keys as memgang.toml(5) documents them (`memgangd man`
//! writes the page from [`KEYS`]).

/// One key of the file as memgang.toml(5) documents it (`memgangd man`
/// writes the page from this table; crates/cli/tests/man.rs checks that
/// every field of the file is here and config.rs's tests that each default
/// is the code's).
pub struct Key {
    pub name: &'static str,
    /// What a value is written as.
    pub unit: &'static str,
    pub default: KeyDefault,
    pub doc: &'static str,
}

/// A key's default: a TOML value that means the same as leaving the key
/// out, or (derived from the machine, or unset) a phrase.
pub enum KeyDefault {
    Value(&'static str),
    Phrase(&'static str),
}

pub const KEYS: &[Key] = &[
    Key {
        name: "pool_memory",
        unit: "bytes (\"700M\", \"18G\", \"1.5GiB\"; K, M, G, T are powers of 1024)",
        default: KeyDefault::Phrase("3/4 of the node's RAM (MemTotal)"),
        doc: "Memory the jobs share: the limit of memgangd's pool cgroup. The rest of the node (the daemon, sshd, the page cache) keeps the remainder.",
    },
    Key {
        name: "policy",
        unit: "batch, cosched, gang, hybrid or auto",
        default: KeyDefault::Value("\"auto\""),
        doc: "Who runs when. auto: co-scheduled while the jobs fit in the pool, hybrid (sets that fit, taking turns) when they do not.",
    },
    Key {
        name: "quantum",
        unit: "duration (\"60s\", \"5min\")",
        default: KeyDefault::Value("\"60s\""),
        doc: "Time slice of gang and hybrid. A switch moves working sets through swap at seconds per GiB; a longer quantum amortizes it.",
    },
    Key {
        name: "max_switch_share",
        unit: "percentage (\"5%\") or fraction (0.05), above 0 and below 1",
        default: KeyDefault::Phrase("unset (fixed quanta)"),
        doc: "The most of the time switching may take: a quantum after a dearer switch grows until switching is this share of switch plus quantum, up to 10 quanta.",
    },
    Key {
        name: "switch",
        unit: "mechanisms joined by /: lru, so, ao, ai, bg[=N]",
        default: KeyDefault::Value("\"so/ao/ai\""),
        doc: "How a switch pages: lru leaves it to the kernel; so (selective page-out), ao (aggressive page-out) and ai (adaptive page-in) are memgang's.",
    },
    Key {
        name: "swap_reserve",
        unit: "bytes",
        default: KeyDefault::Value("\"512M\""),
        doc: "Swap kept back from jobs for the rest of the node: admission promises memory only while pool + swap - reserve holds every admitted job and a switch's exchange.",
    },
    Key {
        name: "paging_prevention",
        unit: "true or false",
        default: KeyDefault::Value("true"),
        doc: "Admit a job only while pool plus usable swap holds every admitted job (paper 003, section 3); otherwise it waits, first come first served. Turn off only to measure what it is worth.",
    },
    Key {
        name: "dynamic_coscheduling",
        unit: "true or false",
        default: KeyDefault::Value("false"),
        doc: "Run jobs that communicate (wake for messages every 100 ms, per rank) at up to nice -5 while they do (paper 003, section 4.1).",
    },
    Key {
        name: "keep_finished_for",
        unit: "duration (\"7days\", \"12h\")",
        default: KeyDefault::Value("\"7days\""),
        doc: "Ended jobs stay in status --all, wait and show (with their output) this long after they end.",
    },
    Key {
        name: "keep_finished_jobs",
        unit: "a count of jobs",
        default: KeyDefault::Value("10000"),
        doc: "And at most this many ended jobs, the newest: a bounded journal and disk.",
    },
    Key {
        name: "state_dir",
        unit: "absolute path",
        default: KeyDefault::Value("\"/var/lib/memgang\""),
        doc: "The journal, jobs' output, the pools this daemon made, the lock. One daemon per state directory.",
    },
    Key {
        name: "socket",
        unit: "absolute path",
        default: KeyDefault::Value("\"/run/memgang/memgang.sock\""),
        doc: "The socket clients connect to (mode 0666; the caller is learned from the kernel). Clients find another with MEMGANG_SOCKET.",
    },
    Key {
        name: "metrics_file",
        unit: "absolute path, or \"\" for none",
        default: KeyDefault::Value("\"/run/memgang/memgang.prom\""),
        doc: "Prometheus text file, rewritten every 5 s, mode 0644, removed when memgangd stops, for node_exporter's textfile collector. Its default is memgang.prom beside the socket.",
    },
    Key {
        name: "metrics_listen",
        unit: "address and port (\"127.0.0.1:9642\"), or \"\" for none",
        default: KeyDefault::Value("\"\""),
        doc: "The same metrics over HTTP (GET /metrics). It has no authentication: bind it to an address only the scraper reaches.",
    },
    Key {
        name: "max_job_command",
        unit: "bytes",
        default: KeyDefault::Value("\"64K\""),
        doc: "A budget (docs/daemon.md, threat model): the bytes of a job's name, command and working directory together. A command line is a few KiB; the kernel takes 128 KiB per argument.",
    },
    Key {
        name: "max_job_environment",
        unit: "bytes",
        default: KeyDefault::Value("\"256K\""),
        doc: "The bytes of a job's environment. A login's is a few KiB, one with modules (Lmod) loaded up to about 100 KiB.",
    },
    Key {
        name: "max_jobs_per_user",
        unit: "a count of jobs",
        default: KeyDefault::Value("1000"),
        doc: "Jobs a user may have in progress (queued, running, suspended) at once; a submission beyond is refused.",
    },
    Key {
        name: "max_user_bytes",
        unit: "bytes",
        default: KeyDefault::Value("\"64M\""),
        doc: "The bytes a user's jobs in progress may hold in memgangd (names, commands, environments), and again their ended jobs kept (the oldest forgotten first).",
    },
    Key {
        name: "keep_finished_jobs_per_user",
        unit: "a count of jobs",
        default: KeyDefault::Value("1000"),
        doc: "Ended jobs kept per user, the newest, beside keep_finished_jobs for all.",
    },
    Key {
        name: "max_answer_bytes",
        unit: "bytes",
        default: KeyDefault::Value("\"1M\""),
        doc: "A job list is answered in pages of about this size (the client asks for the next): a request costs memgangd a page, whatever the jobs.",
    },
    Key {
        name: "user_request_workers",
        unit: "a count of workers",
        default: KeyDefault::Value("1"),
        doc: "Workers one user's requests may hold at once, of the three that answer users: one user's slow requests wait for each other, not for other users.",
    },
    Key {
        name: "lookup_timeout",
        unit: "duration, 1ms to 60s",
        default: KeyDefault::Value("\"2s\""),
        doc: "How long a submission's checks as the user (the working directory, the command on the user's PATH) may take.",
    },
    Key {
        name: "max_locked_memory",
        unit: "bytes",
        default: KeyDefault::Value("\"8M\""),
        doc: "The largest RLIMIT_MEMLOCK a job's process gets, whatever the user's limits (/etc/security/limits.conf) say: locked memory cannot be paged out at a switch, so it counts as resident.",
    },
    Key {
        name: "max_job_output",
        unit: "bytes",
        default: KeyDefault::Value("\"1G\""),
        doc: "The most a job may write to its stdout and stderr together (files in state_dir, looked at every second): a job past it is stopped and ends failed, saying so.",
    },
];
