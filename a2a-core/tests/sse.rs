//! The Server-Sent Events codec (`a2a_core::sse`) against the WHATWG HTML event-stream interpretation: the
//! specification's examples, its edge cases, any split of the bytes, and encoder/decoder round trips.

use a2a_core::sse::{Decoder, Event, Item, LineSplitter, Piece, encode, write_comment};
use proptest::prelude::*;

const MAX: usize = 1 << 20;

fn items(chunks: &[&[u8]]) -> Vec<Item> {
    let mut d = Decoder::new(MAX);
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c).expect("within the limit");
        while let Some(i) = d.next_item() {
            out.push(i);
        }
    }
    d.finish();
    out
}

fn events(bytes: &[u8]) -> Vec<Event> {
    items(&[bytes])
        .into_iter()
        .filter_map(|i| match i {
            Item::Event(e) => Some(e),
            Item::Comment(_) => None,
        })
        .collect()
}

fn ev(id: Option<&str>, event: Option<&str>, data: &str) -> Event {
    Event { id: id.map(str::to_owned), event: event.map(str::to_owned), data: data.to_owned(), ..Event::default() }
}

#[test]
fn whatwg_stock_example() {
    // "data: YHOO\ndata: +2\ndata: 10\n\n": one event, data joined with LF.
    assert_eq!(events(b"data: YHOO\ndata: +2\ndata: 10\n\n"), vec![ev(None, None, "YHOO\n+2\n10")]);
}

#[test]
fn whatwg_four_blocks_example() {
    // The comment block fires nothing; `id` without a value resets the id; one leading space is kept.
    let s = b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n";
    let got = events(s);
    let want =
        vec![ev(Some("1"), None, "first event"), ev(Some(""), None, "second event"), ev(None, None, " third event")];
    assert_eq!(got, want);
    let mut d = Decoder::new(MAX);
    d.feed(s).expect("ok");
    assert_eq!(d.last_event_id(), "", "`id` with no value resets the last event id");
}

#[test]
fn whatwg_empty_data_example() {
    // "data\n\ndata\ndata\n\ndata:": an empty event, an event with a single LF, the last discarded.
    assert_eq!(events(b"data\n\ndata\ndata\n\ndata:"), vec![ev(None, None, ""), ev(None, None, "\n")]);
}

#[test]
fn whatwg_one_space_removed_example() {
    // "data:test\n\ndata: test\n\n": the same data twice.
    assert_eq!(events(b"data:test\n\ndata: test\n\n"), vec![ev(None, None, "test"), ev(None, None, "test")]);
    assert_eq!(events(b"data:  two\n\n")[0].data, " two", "only one space is removed");
}

#[test]
fn line_ends_cr_lf_and_crlf() {
    let want = vec![ev(Some("1"), Some("a"), "x\ny")];
    for s in [
        &b"id: 1\nevent: a\ndata: x\ndata: y\n\n"[..],
        b"id: 1\revent: a\rdata: x\rdata: y\r\r",
        b"id: 1\r\nevent: a\r\ndata: x\r\ndata: y\r\n\r\n",
        b"id: 1\r\nevent: a\rdata: x\ndata: y\r\n\r",
    ] {
        assert_eq!(events(s), want, "{:?}", String::from_utf8_lossy(s));
    }
}

#[test]
fn cr_at_a_chunk_end_and_lf_in_the_next_is_one_line_end() {
    let got = items(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
    assert_eq!(got, vec![Item::Event(ev(None, None, "a\nb"))]);
    // Two CRs are two line ends: the second is the blank line.
    assert_eq!(items(&[b"data: a\r", b"\r"]), vec![Item::Event(ev(None, None, "a"))]);
}

/// A line without its end, and with it.
type TextAndRaw = (Vec<u8>, Vec<u8>);

/// The lines of `chunks` fed one after the other as a relay feeds them: each line's text and its raw bytes (the LF
/// completing a CR LF split across chunks added to the line it ends), and the bytes left without a line end.
fn lines(chunks: &[&[u8]]) -> (Vec<TextAndRaw>, Vec<u8>) {
    let mut splitter = LineSplitter::new();
    let mut buf = Vec::new();
    let mut out: Vec<TextAndRaw> = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        while let Some(piece) = splitter.next_piece(&buf) {
            let raw: Vec<u8> = buf.drain(..piece.len()).collect();
            match piece {
                Piece::Line { text, .. } => out.push((raw[..text].to_vec(), raw)),
                Piece::LineEndRest => out.last_mut().expect("a line before").1.extend_from_slice(&raw),
            }
        }
    }
    (out, buf)
}

fn line(text: &str, raw: &str) -> TextAndRaw {
    (text.as_bytes().to_vec(), raw.as_bytes().to_vec())
}

#[test]
fn raw_lines_end_at_cr_lf_and_crlf_with_their_spans() {
    let (got, rest) = lines(&[b"a: 1\nb: 2\rc: 3\r\n\r\n\rd"]);
    assert_eq!(
        got,
        vec![
            line("a: 1", "a: 1\n"),
            line("b: 2", "b: 2\r"),
            line("c: 3", "c: 3\r\n"),
            line("", "\r\n"),
            line("", "\r")
        ]
    );
    assert_eq!(rest, b"d");
    let mut s = LineSplitter::new();
    assert_eq!(s.next_piece(b"data: x\r\nid"), Some(Piece::Line { text: 7, len: 9 }));
    assert_eq!(s.next_piece(b"\n"), Some(Piece::Line { text: 0, len: 1 }), "a CR LF inside one chunk is whole");
}

#[test]
fn a_cr_ending_a_chunk_ends_its_line_and_an_lf_after_it_belongs_to_that_end() {
    let mut s = LineSplitter::new();
    assert_eq!(s.next_piece(b"data: a\r"), Some(Piece::Line { text: 7, len: 8 }), "the CR ends the line at once");
    assert_eq!(s.next_piece(b""), None);
    assert_eq!(s.next_piece(b"\ndata: b\n"), Some(Piece::LineEndRest));
    assert_eq!(s.next_piece(b"data: b\n"), Some(Piece::Line { text: 7, len: 8 }));
    // After a CR, a byte other than LF starts the next line; two CRs are two line ends.
    let (got, _) = lines(&[b"a\r", b"b\n"]);
    assert_eq!(got, vec![line("a", "a\r"), line("b", "b\n")]);
    let (got, _) = lines(&[b"a\r", b"\r", b"\n"]);
    assert_eq!(got, vec![line("a", "a\r"), line("", "\r\n")]);
}

#[test]
fn a_relay_passing_an_unfinished_line_on_rescans() {
    let mut s = LineSplitter::new();
    let mut buf = b"data: long".to_vec();
    assert_eq!(s.next_piece(&buf), None);
    buf.clear(); // passed on before its end
    s.rescan();
    buf.extend_from_slice(b"er\n");
    assert_eq!(s.next_piece(&buf), Some(Piece::Line { text: 2, len: 3 }));
}

#[test]
fn a_leading_bom_is_skipped_once() {
    assert_eq!(events(b"\xEF\xBB\xBFdata: x\n\n"), vec![ev(None, None, "x")]);
    assert_eq!(items(&[b"\xEF", b"\xBB", b"\xBFdata: x\n\n"]), vec![Item::Event(ev(None, None, "x"))]);
    // A second BOM is part of the field name, an unknown field.
    let got = events(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n");
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn comments_are_not_events() {
    let got = items(&[b": keep-alive\n\n:\n:  two spaces\n\n"]);
    assert_eq!(
        got,
        vec![Item::Comment("keep-alive".into()), Item::Comment(String::new()), Item::Comment(" two spaces".into())]
    );
}

#[test]
fn a_field_without_colon_has_an_empty_value() {
    assert_eq!(events(b"data\nevent\n\n"), vec![ev(None, None, "")]);
}

#[test]
fn only_data_dispatches_but_id_still_counts() {
    let mut d = Decoder::new(MAX);
    d.feed(b"id: 7\nevent: x\n\ndata: after\n\n").expect("ok");
    let e = d.next_event().expect("one event");
    assert_eq!((e.id, e.event, e.data.as_str()), (None, None, "after"));
    assert!(d.next_event().is_none());
    assert_eq!(d.last_event_id(), "7", "the id of an event without data is the last event id");
}

#[test]
fn an_id_with_nul_is_ignored() {
    let mut d = Decoder::new(MAX);
    d.feed(b"id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\n").expect("ok");
    assert_eq!(d.next_event().map(|e| e.id), Some(Some("1".into())));
    assert_eq!(d.next_event().map(|e| e.id), Some(None));
    assert_eq!(d.last_event_id(), "1");
}

#[test]
fn retry_only_when_ascii_digits() {
    let mut d = Decoder::new(MAX);
    d.feed(b"retry: 1500\ndata: a\n\n").expect("ok");
    assert_eq!(d.next_event().and_then(|e| e.retry), Some(1500));
    for bad in ["retry: 1.5", "retry: -1", "retry: 12a", "retry:", "retry:  15", "retry: 99999999999999999999999"] {
        d.feed(format!("{bad}\ndata: b\n\n").as_bytes()).expect("ok");
        assert_eq!(d.next_event().and_then(|e| e.retry), None, "{bad}");
    }
    assert_eq!(d.reconnection_time(), Some(1500), "an invalid retry keeps the last one");
}

#[test]
fn unknown_fields_are_kept_aside_and_event_type_defaults_to_message() {
    let got = events(b"signature: abc\nfoo\ndata: x\nevent:\n\n");
    assert_eq!(got[0].other, vec![("signature".to_owned(), "abc".to_owned()), ("foo".to_owned(), String::new())]);
    assert_eq!((got[0].event.as_deref(), got[0].kind()), (None, "message"));
}

#[test]
fn an_unterminated_last_event_is_discarded() {
    assert_eq!(events(b"data: a\n\ndata: b\n"), vec![ev(None, None, "a")]);
    assert_eq!(events(b"data: a\n\ndata: b"), vec![ev(None, None, "a")]);
    // After finish, the decoder reads a new stream (a reconnection); its last event id stays.
    let mut d = Decoder::new(MAX);
    d.feed(b"id: 3\ndata: a\n\nid: 4\ndata: cut").expect("ok");
    assert!(d.next_event().is_some());
    d.finish();
    d.feed(b"\xEF\xBB\xBFdata: b\n\n").expect("ok");
    assert_eq!(d.next_event().map(|e| e.data), Some("b".into()));
    assert_eq!(d.last_event_id(), "3");
}

#[test]
fn long_lines_and_events_are_refused_past_the_limit() {
    let mut d = Decoder::new(64);
    assert!(d.feed(&[b'x'; 64]).is_ok(), "a line of exactly the limit is held");
    let err = d.feed(b"x").expect_err("past the limit");
    assert_eq!((err.what, err.limit), ("a line", 64));
    let mut d = Decoder::new(64);
    let line = format!("data: {}\n", "y".repeat(40));
    d.feed(line.as_bytes()).expect("one line fits");
    let err = d.feed(line.as_bytes()).expect_err("two do not");
    assert_eq!(err.what, "an event");
    // Events dispatched free their bytes.
    let mut d = Decoder::new(64);
    for _ in 0..100 {
        d.feed(format!("{line}\n").as_bytes()).expect("each event fits");
        assert!(d.next_event().is_some());
    }
    assert_eq!(d.buffered(), 0);
}

#[test]
fn the_encoder_splits_data_and_writes_every_field() {
    let e = Event {
        id: Some("3".into()),
        event: Some("result".into()),
        data: "a\nb\r\nc\rd".into(),
        retry: Some(10),
        other: vec![("signature".into(), "s".into())],
    };
    assert_eq!(encode(&e), "id: 3\nevent: result\nsignature: s\nretry: 10\ndata: a\ndata: b\ndata: c\ndata: d\n\n");
    assert_eq!(encode(&Event::data("{}")), "data: {}\n\n");
    let mut s = String::new();
    write_comment(&mut s, "keep-alive");
    assert_eq!(s, ": keep-alive\n\n");
}

const STREAMS: &[&[u8]] = &[
    b"\xEF\xBB\xBF: hi\r\n\r\nid: 1\r\nevent: status\r\ndata: {\"a\":1}\r\n\r\nid: 2\rdata: x\rdata: y\r\rdata: cut",
    b"data: YHOO\ndata: +2\ndata: 10\n\n: c\nid: 9\n\nretry: 20\ndata\n\n",
    b"id: 1\r\n\r\nid: a\0b\ndata: \xC3\xA9t\xC3\xA9\r\n\r\nsignature: s\ndata:x\n\n",
];

#[test]
fn every_split_of_the_examples_gives_the_same_items() {
    for s in STREAMS {
        let whole = items(&[s]);
        for i in 0..=s.len() {
            assert_eq!(items(&[&s[..i], &s[i..]]), whole, "split at {i} of {:?}", String::from_utf8_lossy(s));
        }
        let bytes: Vec<&[u8]> = s.chunks(1).collect();
        assert_eq!(items(&bytes), whole, "byte by byte");
    }
}

fn arb_event() -> impl Strategy<Value = Event> {
    let text = "[a-z0-9 :{}\"é]{0,12}";
    (
        proptest::option::of("[a-z0-9]{1,4}"),
        proptest::option::of("[a-z]{1,6}"),
        proptest::collection::vec(text, 1..4),
        proptest::option::of(0u64..100_000),
    )
        .prop_map(|(id, event, lines, retry)| Event {
            id,
            event,
            data: lines.join("\n"),
            retry,
            other: Vec::new(),
        })
}

proptest! {
    #[test]
    fn any_split_gives_the_same_items(
        stream in proptest::collection::vec(
            prop_oneof![
                Just(&b"\n"[..]), Just(&b"\r"[..]), Just(&b"\r\n"[..]), Just(&b"data: x"[..]), Just(&b"id: 1"[..]),
                Just(&b": c"[..]), Just(&b"data"[..]), Just(&b"retry: 5"[..]), Just(&b"\xEF\xBB\xBF"[..]),
                Just(&b"event: e"[..]),
            ],
            0..40,
        ),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let s: Vec<u8> = stream.concat();
        let whole = items(&[&s]);
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(s.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks: Vec<&[u8]> = Vec::new();
        let mut from = 0;
        for a in at {
            chunks.push(&s[from..a]);
            from = a;
        }
        chunks.push(&s[from..]);
        prop_assert_eq!(items(&chunks), whole);
    }

    #[test]
    fn raw_lines_are_the_stream_byte_for_byte_and_split_as_the_decoder_splits(
        stream in proptest::collection::vec(
            prop_oneof![Just(&b"\n"[..]), Just(&b"\r"[..]), Just(&b"\r\n"[..]), Just(&b"data: x"[..]), Just(&b":"[..])],
            0..40,
        ),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let s: Vec<u8> = stream.concat();
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(s.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks: Vec<&[u8]> = Vec::new();
        let mut from = 0;
        for a in at {
            chunks.push(&s[from..a]);
            from = a;
        }
        chunks.push(&s[from..]);
        let (got, rest) = lines(&chunks);
        let (whole, whole_rest) = lines(&[&s]);
        let mut again: Vec<u8> = got.iter().flat_map(|(_, raw)| raw.iter().copied()).collect();
        again.extend_from_slice(&rest);
        prop_assert_eq!(&again, &s);
        prop_assert_eq!(&got, &whole);
        prop_assert_eq!(&rest, &whole_rest);
        // The WHATWG split of the whole stream: CR LF, then CR and LF, end a line.
        let norm = String::from_utf8(s.clone()).expect("ASCII").replace("\r\n", "\n").replace('\r', "\n");
        let mut want: Vec<&str> = norm.split('\n').collect();
        want.pop();
        let texts: Vec<String> = got.iter().map(|(t, _)| String::from_utf8(t.clone()).expect("ASCII")).collect();
        prop_assert_eq!(texts, want);
    }

    #[test]
    fn encode_then_decode_round_trips(evs in proptest::collection::vec(arb_event(), 0..6)) {
        let mut wire = String::new();
        for e in &evs {
            wire.push_str(&encode(e));
        }
        prop_assert_eq!(events(wire.as_bytes()), evs);
    }
}
