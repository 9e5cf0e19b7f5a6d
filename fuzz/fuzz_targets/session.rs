//! A `Session` (optional PROXY header, routing, lines until a TUNNEL
//! marker, then raw bytes) driven through a `Conn` on any bytes: whole,
//! byte-at-a-time and cut input give the same events and the same final
//! error, nothing comes after the end, and every byte is accounted for.

#![no_main]

use cleave_proto::{Bytes, Lines, ProxyMode, Session, SessionConfig};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;
#[path = "../../core/tests/support/session_model.rs"]
mod session_model;

use harness::pieces;
use session_model::{accounted, drive, rules};

fuzz_target!(|data: &[u8]| {
    let Some((&[knobs, a, b], input)) = data.split_first_chunk::<3>() else {
        return;
    };
    let proxy = match knobs % 3 {
        0 => ProxyMode::Off,
        1 => ProxyMode::Optional,
        _ => ProxyMode::Required,
    };
    let config = SessionConfig::default().proxy(proxy);
    let framed = knobs & 0x80 != 0;
    let sizes = [usize::from(a % 32) + 1, usize::from(b % 32) + 1];
    let run = |pieces: &[&[u8]]| {
        if framed {
            let session = Session::framed(
                rules(),
                Lines::new(),
                |l: &Bytes| &l[..] == b"TUNNEL",
                config,
            );
            drive(session, pieces)
        } else {
            drive(Session::tunnel(rules(), config), pieces)
        }
    };
    let (whole, whole_error) = run(&[input]);
    let (bytewise, bytewise_error) = run(&pieces(input, &[1]));
    let (cut, cut_error) = run(&pieces(input, &sizes));
    assert_eq!(bytewise, whole);
    assert_eq!(cut, whole);
    assert_eq!(bytewise_error, whole_error);
    assert_eq!(cut_error, whole_error);
    if whole_error.is_none() {
        // Lines drop their delimiter and maybe a `\r`: count frames as
        // consuming up to 2 bytes more than they hold.
        let frames = whole
            .iter()
            .filter(|e| matches!(e, cleave_proto::Event::Frame(_)))
            .count();
        let seen = accounted(&whole, 0);
        assert!(
            seen <= input.len() && input.len() <= seen + 2 * frames,
            "{seen} of {} bytes",
            input.len()
        );
    }
});
