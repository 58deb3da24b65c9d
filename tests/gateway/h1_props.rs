//! Properties of the gateway's HTTP/1.1 parsing (`a2a_gateway::h1`) over arbitrary input: no input panics or reads
//! out of bounds; heads written by the gateway parse back to what was written; a chunked body decodes to its data
//! whatever pieces it arrives in; framing is refused, never guessed, when it is ambiguous.

use a2a_gateway::h1::body::{Chunked, Decoded, Framing, request_framing, response_framing};
use a2a_gateway::h1::head::{parse_request, parse_response};
use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

fn token() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9-]{0,20}"
}

fn value() -> impl Strategy<Value = String> {
    "[ -~]{0,40}".prop_map(|v| v.trim().to_owned())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(Some(p)) = parse_request(&raw, 64) {
            prop_assert!(p.len <= raw.len());
            let len = p.len;
            if let Ok(head) = p.bind(Bytes::copy_from_slice(&raw[..len])) {
                for (n, v) in head.headers.iter() {
                    prop_assert!(!n.is_empty());
                    prop_assert!(v.len() <= raw.len());
                }
                let _ = request_framing(&head.headers, head.version);
            }
        }
        if let Ok(Some(p)) = parse_response(&raw) {
            let len = p.len;
            let head = p.bind(Bytes::copy_from_slice(&raw[..len]));
            let _ = response_framing(head.status, &head.headers);
        }
        let mut dec = Chunked::default();
        let mut buf = BytesMut::from(&raw[..]);
        for _ in 0..raw.len() + 2 {
            match dec.decode(&mut buf) {
                Ok(Decoded::Data(d)) => prop_assert!(!d.is_empty()),
                Ok(Decoded::NeedMore) | Ok(Decoded::End) | Err(_) => break,
            }
        }
    }

    #[test]
    fn a_written_head_parses_back_to_its_fields(
        fields in proptest::collection::vec((token(), value()), 0..20),
        split in 0usize..400,
    ) {
        let mut raw = b"POST /a2a/negotiate?x=1 HTTP/1.1\r\n".to_vec();
        for (n, v) in &fields {
            raw.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        // A head cut anywhere before its end is incomplete, never wrong.
        let cut = split.min(raw.len() - 1);
        prop_assert!(parse_request(&raw[..cut], 64).expect("valid so far").is_none());
        let p = parse_request(&raw, 64).expect("valid").expect("complete");
        prop_assert_eq!(p.len, raw.len());
        let head = p.bind(Bytes::from(raw.clone())).expect("a path");
        prop_assert_eq!(head.target(), "/a2a/negotiate?x=1");
        let got: Vec<(String, String)> = head
            .headers
            .iter()
            .map(|(n, v)| (String::from_utf8_lossy(n).into_owned(), String::from_utf8_lossy(v).into_owned()))
            .collect();
        prop_assert_eq!(&got, &fields);
        for (n, v) in &fields {
            // The first field of a name, found whatever the case it is asked in.
            let first = fields.iter().find(|(m, _)| m.eq_ignore_ascii_case(n)).map(|(_, v)| v.as_bytes());
            prop_assert_eq!(head.headers.get(&n.to_ascii_lowercase()), first);
            let _ = v;
        }
    }

    #[test]
    fn a_chunked_body_decodes_to_its_data_in_any_pieces(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..300), 0..8),
        piece in 1usize..64,
    ) {
        let mut raw = Vec::new();
        for c in &chunks {
            a2a_gateway::h1::body::encode_chunk(&mut raw, c);
        }
        raw.extend_from_slice(a2a_gateway::h1::body::LAST_CHUNK);
        raw.extend_from_slice(b"NEXT");
        let mut dec = Chunked::default();
        let mut buf = BytesMut::new();
        let mut fed = 0;
        let mut body = Vec::new();
        loop {
            match dec.decode(&mut buf).expect("valid") {
                Decoded::Data(d) => body.extend_from_slice(&d),
                Decoded::End => break,
                Decoded::NeedMore => {
                    prop_assert!(fed < raw.len(), "ran out of input");
                    let end = (fed + piece).min(raw.len());
                    buf.extend_from_slice(&raw[fed..end]);
                    fed = end;
                }
            }
        }
        prop_assert_eq!(body, chunks.concat());
        let mut rest = buf.to_vec();
        rest.extend_from_slice(&raw[fed..]);
        prop_assert_eq!(rest, b"NEXT".to_vec(), "what follows the body is left for the next message");
    }

    #[test]
    fn framing_is_one_way_or_refused(cl in proptest::option::of(0u64..100_000), te in proptest::option::of(prop_oneof![Just("chunked"), Just("gzip"), Just("chunked, chunked"), Just("gzip, chunked")]), dup in any::<bool>()) {
        let mut raw = "POST / HTTP/1.1\r\n".to_owned();
        if let Some(n) = cl {
            raw.push_str(&format!("Content-Length: {n}\r\n"));
            if dup {
                raw.push_str(&format!("Content-Length: {}\r\n", n + 1));
            }
        }
        if let Some(t) = te {
            raw.push_str(&format!("Transfer-Encoding: {t}\r\n"));
        }
        raw.push_str("\r\n");
        let p = parse_request(raw.as_bytes(), 64).expect("valid").expect("complete");
        let head = p.bind(Bytes::from(raw.clone())).expect("a path");
        let framing = request_framing(&head.headers, head.version);
        match (cl, te) {
            (Some(_), Some(_)) => prop_assert!(framing.is_err(), "both: refused"),
            (Some(_), None) if dup => prop_assert!(framing.is_err(), "two lengths: refused"),
            (Some(0), None) => prop_assert_eq!(framing, Ok(Framing::Empty)),
            (Some(n), None) => prop_assert_eq!(framing, Ok(Framing::Length(n))),
            (None, Some("chunked")) => prop_assert_eq!(framing, Ok(Framing::Chunked)),
            (None, Some(_)) => prop_assert!(framing.is_err(), "only a single final chunked"),
            (None, None) => prop_assert_eq!(framing, Ok(Framing::Empty)),
        }
    }
}
