//! Messages a process receives over TCP, for dynamic coscheduling: the
//! kernel's per-socket count of data segments received (`tcp_info`'s
//! `tcpi_data_segs_in`, read for every TCP socket at once through
//! sock_diag), and which sockets a process holds (/proc/PID/fd).
//!
//! Why a second counter beside the wake-up count
//! (`process::wakeups`): an MPI rank
//! that busy-polls (Open MPI does by default) never sleeps for its
//! message, so it shows no wake-ups however much it receives. Its TCP
//! sockets still count every segment. Pure ACKs are left out (data
//! segments only): a sender's ACKs are not messages to it. Unix sockets
//! and shared memory have no such counter.

use crate::error::{Error, Result};
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::inet::nlas::Nla;
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_packet_sock_diag::{SockDiagMessage, AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};
use std::collections::HashMap;
use std::path::PathBuf;

/// Data segments received so far by each TCP socket of this network
/// namespace, by socket inode (IPv4 and IPv6).
pub fn tcp_data_segments_in() -> Result<HashMap<u64, u32>> {
    let err = |what: &'static str, e: std::io::Error| {
        Error::io(what, PathBuf::from("netlink sock_diag (TCP sockets)"), e)
    };
    let socket = Socket::new(NETLINK_SOCK_DIAG).map_err(|e| err("opening", e))?;
    socket
        .connect(&SocketAddr::new(0, 0))
        .map_err(|e| err("connecting to", e))?;
    let mut counts = HashMap::new();
    for (family, socket_id) in [
        (AF_INET, SocketId::new_v4()),
        (AF_INET6, SocketId::new_v6()),
    ] {
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        let mut request = NetlinkMessage::new(
            header,
            SockDiagMessage::InetRequest(InetRequest {
                family,
                protocol: IPPROTO_TCP,
                extensions: ExtensionFlags::INFO,
                states: StateFlags::all(),
                socket_id,
            })
            .into(),
        );
        request.finalize();
        let mut buf = vec![0; request.buffer_len()];
        request.serialize(&mut buf);
        socket.send(&buf, 0).map_err(|e| err("asking", e))?;
        'dump: loop {
            let (datagram, _) = socket.recv_from_full().map_err(|e| err("reading", e))?;
            let mut rest = &datagram[..];
            while !rest.is_empty() {
                let message =
                    NetlinkMessage::<SockDiagMessage>::deserialize(rest).map_err(|e| {
                        err(
                            "parsing the answer of",
                            std::io::Error::other(e.to_string()),
                        )
                    })?;
                let len = message.header.length as usize;
                match message.payload {
                    NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                        for nla in &r.nlas {
                            if let Nla::TcpInfo(info) = nla {
                                counts.insert(r.header.inode as u64, info.data_segs_in);
                            }
                        }
                    }
                    NetlinkPayload::Done(_) => break 'dump,
                    NetlinkPayload::Error(e) => {
                        return Err(err("dumping", std::io::Error::other(format!("{e:?}"))));
                    }
                    _ => {}
                }
                if len == 0 || len > rest.len() {
                    break;
                }
                rest = &rest[len..];
            }
        }
    }
    Ok(counts)
}

/// The inodes of the sockets process `pid` holds open.
pub fn socket_inodes(pid: i32) -> Result<Vec<u64>> {
    let err = |e: procfs::ProcError| {
        Error::io(
            "listing the open files of",
            PathBuf::from(format!("/proc/{pid}/fd")),
            std::io::Error::other(e),
        )
    };
    let p = procfs::process::Process::new(pid).map_err(err)?;
    // A descriptor closed meanwhile is skipped.
    Ok(p.fd()
        .map_err(err)?
        .flatten()
        .filter_map(|fd| match fd.target {
            procfs::process::FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    fn inode(s: &impl AsRawFd) -> u64 {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", s.as_raw_fd())).unwrap();
        let link = link.to_str().unwrap();
        link.trim_start_matches("socket:[")
            .trim_end_matches(']')
            .parse()
            .unwrap()
    }

    #[test]
    fn a_socket_counts_the_messages_it_received_and_not_those_it_sent() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.set_nodelay(true).unwrap();
        let before = tcp_data_segments_in().unwrap();
        // Ten small messages, each read before the next is sent: ten segments.
        let mut byte = [0u8; 1];
        for _ in 0..10 {
            client.write_all(b"x").unwrap();
            server.read_exact(&mut byte).unwrap();
        }
        let after = tcp_data_segments_in().unwrap();
        let (s, c) = (inode(&server), inode(&client));
        let received = after[&s].wrapping_sub(before[&s]);
        assert_eq!(received, 10, "server socket {s}");
        assert_eq!(after[&c].wrapping_sub(before[&c]), 0, "client socket {c}");
        let mine = socket_inodes(std::process::id() as i32).unwrap();
        assert!(mine.contains(&s) && mine.contains(&c), "{mine:?}");
    }

    #[test]
    fn a_missing_process_is_an_error_naming_it() {
        let e = socket_inodes(i32::MAX).unwrap_err().to_string();
        assert!(e.contains(&format!("/proc/{}/fd", i32::MAX)), "{e}");
    }
}
