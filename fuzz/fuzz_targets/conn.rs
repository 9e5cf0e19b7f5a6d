//! A `Conn` over a `Session` (tunnel or lines until a TUNNEL marker, with
//! or without a PROXY header) driven by a scripted socket the fuzzer
//! writes: reads of the input in the sizes it picks (into the spare room,
//! through `read_with`, or fed), partial writes, application pushes, the
//! clock and its timeouts, the end of the stream, read and write errors,
//! closes, resets and pauses, interleaved. The model in
//! `core/tests/support/conn_model.rs` checks every step: nothing lost, no
//! event after the end, errors final, the write side shut at most once and
//! never before its bytes are out, the deadlines; a script that only reads,
//! writes and pushes gives the events of the whole input.

#![no_main]

use core::time::Duration;

use cleave_proto::conn::ConnConfig;
use cleave_proto::{
    Bytes, Lines, LinesConfig, NoSwitch, ProxyMode, RecvBufConfig, Session, SessionConfig,
    Timeouts, WriteQueueConfig,
};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/conn_model.rs"]
mod conn_model;

#[path = "../../core/tests/support/session_model.rs"]
mod session_model;

use conn_model::{run, whole, Account, Step};
use session_model::rules;

/// A timeout of `knob` × 8 ms, none for 0.
fn timeout(knob: u8) -> Option<Duration> {
    (knob != 0).then(|| Duration::from_millis(u64::from(knob) * 8))
}

/// The configuration from 8 bytes: the session's, the buffer's, the
/// queue's, the timeouts.
fn config(knobs: [u8; 8]) -> Option<(SessionConfig, bool, ConnConfig)> {
    let proxy = match knobs[0] % 3 {
        0 => ProxyMode::Off,
        1 => ProxyMode::Optional,
        _ => ProxyMode::Required,
    };
    let framed = knobs[0] & 0x80 != 0;
    let mut recv = RecvBufConfig::default()
        .read_reserve(usize::from(knobs[1] % 64) + 1)
        .ok()?;
    if knobs[0] & 0x40 != 0 {
        recv = recv.max_buffered(usize::from(knobs[2]) * 4 + 16).ok()?;
    }
    let send = WriteQueueConfig::default()
        .max_items(usize::from(knobs[3] % 8) + 1)
        .ok()?
        .max_bytes(usize::from(knobs[3]) * 4 + 1)
        .ok()?;
    let timeouts = Timeouts::NONE
        .idle(timeout(knobs[4]))
        .opening(timeout(knobs[5]))
        .frame(timeout(knobs[6]))
        .tunnel_idle(timeout(knobs[7]));
    let conn = ConnConfig::default()
        .recv_buf(recv)
        .write_queue(send)
        .timeouts(timeouts);
    Some((SessionConfig::default().proxy(proxy), framed, conn))
}

/// One step per 3 bytes.
fn step(&[op, a, b]: &[u8; 3]) -> Step {
    match op % 16 {
        0..=4 => Step::Read {
            len: usize::from(a) + 1,
            via: b,
        },
        5..=7 => Step::Write {
            share: a,
            room: usize::from(b % 8) + 1,
            via: b >> 3,
        },
        8 | 9 => Step::Push {
            len: usize::from(a) * (1 + usize::from(b & 3)),
            frame: b & 4 != 0,
        },
        10 | 11 => Step::Tick {
            ms: u64::from(a) * (1 + u64::from(b % 16)),
        },
        12 => Step::Pause(a & 1 != 0),
        13 => match a % 6 {
            0 => Step::Eof { via: b },
            1 => Step::ReadError { via: b },
            2 => Step::WriteError { via: b },
            3 => Step::Close,
            4 => Step::ShutdownFails,
            _ => Step::Reset,
        },
        _ => Step::Shutdown,
    }
}

/// Steps that leave the events alone.
fn quiet(step: &Step) -> bool {
    matches!(
        step,
        Step::Read { .. }
            | Step::Write { .. }
            | Step::Push { .. }
            | Step::Shutdown
            | Step::ShutdownFails
            | Step::Close
            | Step::Pause(_)
    )
}

fn check<P: Account>(make: impl Fn() -> P, config: ConnConfig, input: &[u8], steps: &[Step]) {
    let outcome = run(make(), config, Duration::ZERO, input, steps);
    if steps.iter().all(quiet) {
        let (events, error) = whole(make(), config, input);
        assert_eq!(outcome.events, events, "the reads changed the events");
        assert_eq!(outcome.error, error, "the reads changed the error");
    }
}

fn is_tunnel(line: &Bytes) -> bool {
    &line[..] == b"TUNNEL"
}

fuzz_target!(|data: &[u8]| {
    let Some((knobs, rest)) = data.split_first_chunk::<10>() else {
        return;
    };
    let Some((session, framed, conn)) = config(knobs[..8].try_into().expect("8 bytes")) else {
        return;
    };
    let len = usize::from(u16::from_le_bytes([knobs[8], knobs[9]])).min(rest.len());
    let (input, script) = rest.split_at(len);
    let steps: Vec<Step> = script
        .chunks_exact(3)
        .map(|s| step(s.try_into().expect("3 bytes")))
        .collect();
    if framed {
        let lines = Lines::with_config(LinesConfig::default().strip_cr(false));
        let make = || {
            Session::framed(
                rules(),
                lines.clone(),
                is_tunnel as NoSwitch<Bytes>,
                session,
            )
        };
        check(make, conn, input, &steps);
    } else {
        check(|| Session::tunnel(rules(), session), conn, input, &steps);
    }
});
