//! An optional HTTP listener for Prometheus (`metrics_listen`): `GET
//! /metrics` answers the text the daemon last wrote to its metrics file,
//! anything else 404 or 405. It serves scrapers, not users, so it holds
//! nothing a scrape cannot lose: a few connections at once, each cut at a
//! deadline, and every other connection closed at once.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections served at once. A scraper opens one per scrape; more than
/// a handful at once is someone else's flood, which should cost a thread
/// each at most this many times.
const MAX_CONNECTIONS: usize = 8;
/// A request's head (request line and headers) must arrive, and the
/// answer leave, within this: Prometheus's default scrape timeout is 10 s,
/// and a scraper sends its head at once.
const DEADLINE: Duration = Duration::from_secs(5);
/// The largest request head read: a GET with a scraper's headers is a few
/// hundred bytes.
const MAX_HEAD: usize = 8 << 10;
/// After a failed accept (out of descriptors), wait this long, doubling up
/// to `BACKOFF_MAX`, instead of spinning on the error.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The metrics text the service last rendered.
pub type Latest = Arc<Mutex<String>>;

/// Serve `latest` on `listener` until the process ends.
pub fn serve(listener: TcpListener, latest: Latest) {
    serve_with(listener, latest, DEADLINE)
}

fn serve_with(listener: TcpListener, latest: Latest, deadline: Duration) {
    let busy = Arc::new(AtomicUsize::new(0));
    let mut backoff = BACKOFF_MIN;
    loop {
        let conn = match listener.accept() {
            Ok((conn, _)) => {
                backoff = BACKOFF_MIN;
                conn
            }
            Err(e) => {
                tracing::warn!("metrics listener: accept: {e}");
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            busy.fetch_sub(1, Ordering::SeqCst);
            drop(conn);
            continue;
        }
        let (busy, latest) = (busy.clone(), latest.clone());
        std::thread::spawn(move || {
            let _ = answer(conn, &latest, deadline);
            busy.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

fn answer(mut conn: TcpStream, latest: &Mutex<String>, deadline: Duration) -> std::io::Result<()> {
    let end = Instant::now() + deadline;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() || head.len() > MAX_HEAD {
            return Ok(());
        }
        conn.set_read_timeout(Some(left))?;
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, path) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, body) = match (method, path) {
        (b"GET", b"/metrics") => (
            "200 OK",
            latest.lock().map(|s| s.clone()).unwrap_or_default(),
        ),
        (b"GET", _) => (
            "404 Not Found",
            "memgangd serves /metrics only\n".to_string(),
        ),
        _ => ("405 Method Not Allowed", "GET /metrics\n".to_string()),
    };
    conn.set_write_timeout(Some(
        end.saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1)),
    ))?;
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(deadline: Duration) -> (std::net::SocketAddr, Latest) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let latest: Latest = Arc::new(Mutex::new("memgang_jobs 3\n".into()));
        let l2 = latest.clone();
        std::thread::spawn(move || serve_with(l, l2, deadline));
        (addr, latest)
    }

    fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn get_metrics_answers_the_latest_text_and_nothing_else() {
        let (addr, latest) = server(DEADLINE);
        let r = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\nmemgang_jobs 3\n"), "{r}");
        *latest.lock().unwrap() = "memgang_jobs 4\n".into();
        let r = get(addr, "GET /metrics?x=1 HTTP/1.0\r\n\r\n");
        assert!(r.ends_with("memgang_jobs 4\n"), "{r}");
        assert!(get(addr, "GET /etc/passwd HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    }

    #[test]
    fn idle_and_endless_clients_are_cut_and_a_scrape_still_gets_through() {
        let (addr, _) = server(Duration::from_millis(300));
        // More idle connections than it serves at once, and one that
        // sends an endless head.
        let idle: Vec<TcpStream> = (0..3 * MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let mut endless = TcpStream::connect(addr).unwrap();
        let _ = endless.write_all(&vec![b'a'; 4 * MAX_HEAD]);
        // Within the deadline the idle ones are cut and a scrape answered.
        let t = Instant::now();
        loop {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let _ = c.write_all(b"GET /metrics HTTP/1.1\r\n\r\n");
            let mut out = String::new();
            let _ = c.read_to_string(&mut out);
            if out.starts_with("HTTP/1.1 200") {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "no scrape answered during the flood"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(idle);
    }
}
