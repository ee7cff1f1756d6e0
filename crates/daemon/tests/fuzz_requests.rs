//! The request decoder under any bytes a client may send: an answer or a
//! clear error, never a panic; what a client encodes decodes the same.

use memgang_proto::{Request, Stream};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn decode(bytes: &[u8]) -> Result<Request, serde_json::Error> {
    serde_json::from_slice(bytes)
}

fn request() -> impl Strategy<Value = Request> {
    let text = "\\PC{0,20}";
    prop_oneof![
        Just(Request::List { after: None }),
        any::<u64>().prop_map(|id| Request::Show { id }),
        any::<u64>().prop_map(|id| Request::Cancel { id }),
        (any::<u64>(), any::<bool>(), any::<u64>()).prop_map(|(id, err, offset)| Request::Output {
            id,
            stream: if err { Stream::Stderr } else { Stream::Stdout },
            offset,
        }),
        (
            proptest::collection::vec(text, 0..4),
            any::<u64>(),
            any::<u32>(),
            text,
            proptest::collection::btree_map(text, text, 0..4),
            proptest::option::of(text),
        )
            .prop_map(|(command, memory_bytes, ranks, cwd, env, name)| {
                Request::Submit {
                    command,
                    memory_bytes,
                    ranks,
                    cwd: cwd.into(),
                    env: env.into_iter().collect::<BTreeMap<_, _>>(),
                    name,
                    queue: Default::default(),
                }
            }),
    ]
}

proptest! {
    // Pure decoding: a thousand cases take well under a second.
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn a_request_round_trips_as_one_line(r in request()) {
        let line = serde_json::to_string(&r).unwrap();
        prop_assert!(!line.contains('\n'));
        prop_assert_eq!(decode(line.as_bytes()).unwrap(), r);
    }

    #[test]
    fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode(&bytes);
    }

    /// A valid request cut, with bytes flipped or inserted: an error or a
    /// request, never a panic.
    #[test]
    fn mangled_requests_decode_or_fail_cleanly(
        r in request(),
        cut in any::<usize>(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
    ) {
        let mut bytes = serde_json::to_vec(&r).unwrap();
        for (at, b) in flips {
            if bytes.is_empty() { break; }
            let at = at % bytes.len();
            if b % 2 == 0 { bytes[at] = b; } else { bytes.insert(at, b); }
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let _ = decode(&bytes);
    }
}
