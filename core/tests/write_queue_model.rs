//! A seeded random model of the write queue with fences (set at any time,
//! even while an urgent push is half written), large urgent pushes and
//! frames, checked byte for byte: every record whole and in its lane's
//! order, tickets complete when their bytes are written, the limits kept,
//! and urgent records that start after a fence come after what it holds.

#[path = "support/rng.rs"]
mod rng;

use cleave_proto::{Bytes, Frame, Lane, Ticket, WriteQueue, WriteQueueConfig};
use rng::Rng;

fn record(lane: u8, id: u32, len: usize) -> Vec<u8> {
    let len = len.max(10);
    let mut r = vec![0xAB, lane];
    r.extend_from_slice(&id.to_le_bytes());
    r.extend_from_slice(&(len as u32).to_le_bytes());
    r.resize(len, (id % 170) as u8);
    r
}

/// A whole record written: its lane, its id and where it ends.
type Record = (u8, u32, usize);

/// Parses whole records; a partial one (lane, id) must be last.
fn parse(out: &[u8]) -> (Vec<Record>, Option<(u8, u32)>) {
    let mut v = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let rest = &out[at..];
        assert_eq!(rest[0], 0xAB, "a record starts inside another at {at}");
        if rest.len() < 10 {
            return (v, Some((rest.get(1).copied().unwrap_or(9), u32::MAX)));
        }
        let lane = rest[1];
        let id = u32::from_le_bytes(rest[2..6].try_into().unwrap());
        let len = u32::from_le_bytes(rest[6..10].try_into().unwrap()) as usize;
        let have = rest.len().min(len);
        assert!(
            rest[10..have].iter().all(|&b| b == (id % 170) as u8),
            "corrupt record {id} lane {lane} at {at}: {:?}",
            &rest[..have.min(40)]
        );
        if rest.len() < len {
            return (v, Some((lane, id)));
        }
        at += len;
        v.push((lane, id, at));
    }
    (v, None)
}

fn run(seed: u64) {
    let log = std::env::var("QLOG").is_ok();
    let mut rng = Rng(seed);
    let config = WriteQueueConfig::default()
        .max_items(1 + rng.below(10) as usize)
        .unwrap()
        .max_bytes(1 + rng.below(5000) as usize)
        .unwrap()
        .urgent_max_items(1 + rng.below(4) as usize)
        .unwrap()
        .urgent_max_bytes(1 + rng.below(3000) as usize)
        .unwrap()
        .coalesce_below(rng.below(700) as usize)
        .coalesce_limit(1 + rng.below(3000) as usize)
        .unwrap()
        .piece_size(1 + rng.below(1600) as usize)
        .unwrap()
        .max_slices(1 + rng.below(8) as usize)
        .unwrap()
        .max_drain_bytes(1 + rng.below(6000) as usize)
        .unwrap()
        .release_when_idle(rng.one_in(2));
    let mut q = WriteQueue::with_config(config);
    let mut out: Vec<u8> = Vec::new();
    let mut next = 0u32;
    // (lane, id or None for empty, ticket)
    let mut accepted: Vec<(u8, Option<u32>, Ticket)> = Vec::new();
    // Fences: (output length when set, ids of bulk records pending then).
    let mut fences: Vec<(usize, Vec<u32>)> = Vec::new();
    let mut done: Vec<bool> = Vec::new();
    for _step in 0..200 {
        match rng.below(10) {
            0..=3 => {
                let urgent = rng.one_in(3);
                let lane = if urgent { 1 } else { 0 };
                let len = match rng.below(3) {
                    0 => 10 + rng.below(30) as usize,
                    1 => 10 + rng.below(700) as usize,
                    _ => 600 + rng.below(2500) as usize,
                };
                let id = next;
                next += 1;
                let r = record(lane, id, len);
                let a = rng.below(r.len() as u64 + 1) as usize;
                let b = a + rng.below((r.len() - a) as u64 + 1) as usize;
                let res = match rng.below(3) {
                    0 => {
                        let bytes = Bytes::from(r.clone());
                        if urgent {
                            q.push_urgent(bytes).map_err(drop)
                        } else {
                            q.push(bytes).map_err(drop)
                        }
                    }
                    1 => {
                        let f = Frame::new(
                            Bytes::copy_from_slice(&r[..a]),
                            Bytes::copy_from_slice(&r[a..b]),
                            Bytes::copy_from_slice(&r[b..]),
                        );
                        if urgent {
                            q.push_urgent_frame(f).map_err(drop)
                        } else {
                            q.push_frame(f).map_err(drop)
                        }
                    }
                    _ => {
                        let (a, b) = (a.min(16), r.len() - (r.len() - b).min(16));
                        let (a, b) = (a.min(b), b.max(a));
                        let f =
                            Frame::with_framing(&r[..a], Bytes::copy_from_slice(&r[a..b]), &r[b..]);
                        if urgent {
                            q.push_urgent_frame(f).map_err(drop)
                        } else {
                            q.push_frame(f).map_err(drop)
                        }
                    }
                };
                if log {
                    eprintln!(
                        "push lane {lane} id {id} len {} cut {a} {b} ok {}",
                        r.len(),
                        res.is_ok()
                    );
                }
                if let Ok(t) = res {
                    accepted.push((lane, Some(id), t));
                    done.push(false);
                }
            }
            4 => {
                let urgent = rng.one_in(2);
                let res = if urgent {
                    q.push_urgent(Bytes::new())
                } else {
                    q.push(Bytes::new())
                };
                if log {
                    eprintln!("empty urgent {urgent} ok {}", res.is_ok());
                }
                if let Ok(t) = res {
                    accepted.push((if urgent { 1 } else { 0 }, None, t));
                    done.push(false);
                }
            }
            5 => {
                // A fence, even with an urgent record cut short (its
                // rest goes first).
                {
                    q.fence();
                    if log {
                        eprintln!("fence at {}", out.len());
                    }
                    let (recs, _) = parse(&out);
                    let pending: Vec<u32> = accepted
                        .iter()
                        .filter(|(l, id, _)| *l == 0 && id.is_some())
                        .map(|(_, id, _)| id.unwrap())
                        .filter(|id| !recs.iter().any(|r| r.0 == 0 && r.1 == *id))
                        .collect();
                    fences.push((out.len(), pending));
                }
            }
            6 => {
                q.release_idle();
            }
            _ => {
                let room = rng.below(10) as usize;
                let presented = {
                    let mut s = vec![&b""[..]; room];
                    let n = q.chunks(&mut s);
                    assert!(n <= room);
                    for x in &s[..n] {
                        assert!(!x.is_empty() && x.len() <= config.get_piece_size());
                    }
                    s[..n].concat()
                };
                assert!(presented.len() <= config.get_max_drain_bytes());
                let n = if rng.one_in(2) {
                    presented.len()
                } else {
                    rng.below(presented.len() as u64 + 1) as usize
                };
                q.advance(n).unwrap();
                if log {
                    eprintln!(
                        "write room {room} presented {} took {n} out {} -> {:?}",
                        presented.len(),
                        out.len(),
                        &presented[..n.min(12)]
                    );
                }
                out.extend_from_slice(&presented[..n]);
            }
        }
        // Checks after every step.
        let (recs, _) = parse(&out);
        for lane in [0u8, 1] {
            let mut all_before = true;
            for (i, (l, id, t)) in accepted.iter().enumerate() {
                if *l != lane {
                    continue;
                }
                let written = match id {
                    Some(id) => recs.iter().any(|r| r.0 == lane && r.1 == *id),
                    None => all_before,
                };
                assert_eq!(
                    q.is_written(*t),
                    written,
                    "seed {seed}: ticket {t:?} id {id:?}"
                );
                assert!(!done[i] || written);
                done[i] = written;
                all_before &= written;
            }
        }
        for lane in [Lane::Bulk, Lane::Urgent] {
            let (mi, mb) = match lane {
                Lane::Bulk => (config.get_max_items(), config.get_max_bytes()),
                Lane::Urgent => (config.get_urgent_max_items(), config.get_urgent_max_bytes()),
            };
            let (i, b) = (q.pending_items(lane), q.pending_bytes(lane));
            assert!(i <= mi, "seed {seed}: items");
            assert!(b <= mb || i == 1, "seed {seed}: bytes {b} in {i} over {mb}");
        }
    }
    // Drain the rest.
    let mut rounds = 0;
    while !q.is_flushed() {
        let presented = {
            let mut s = vec![&b""[..]; 8];
            let n = q.chunks(&mut s);
            s[..n].concat()
        };
        q.advance(presented.len()).unwrap();
        out.extend_from_slice(&presented);
        rounds += 1;
        assert!(rounds < 100_000);
    }
    let (recs, partial) = parse(&out);
    assert!(partial.is_none(), "seed {seed}: cut short");
    for lane in [0u8, 1] {
        let got: Vec<u32> = recs.iter().filter(|r| r.0 == lane).map(|r| r.1).collect();
        let want: Vec<u32> = accepted
            .iter()
            .filter(|a| a.0 == lane)
            .filter_map(|a| a.1)
            .collect();
        assert_eq!(got, want, "seed {seed}: lane {lane}");
    }
    for (i, (_, _, t)) in accepted.iter().enumerate() {
        assert!(q.is_written(*t), "seed {seed}: ticket {i} never completed");
    }
    // Fences: urgent bytes written after a fence come after the fenced
    // bulk records.
    for (at, ids) in &fences {
        let Some(last_end) = ids
            .iter()
            .map(|id| recs.iter().find(|r| r.0 == 0 && r.1 == *id).unwrap().2)
            .max()
        else {
            continue;
        };
        let mut pos = 0;
        for r in &recs {
            let start = pos;
            pos = r.2;
            if r.0 == 1 && start >= *at {
                assert!(start >= last_end, "seed {seed}: urgent record {} at {start} before fenced bulk ends at {last_end}", r.1);
            }
        }
    }
    q.release_idle();
}

#[test]
fn queue_model_with_fences() {
    if let Ok(seed) = std::env::var("QSEED") {
        run(seed.parse().unwrap());
        return;
    }
    for seed in 1..1000u64 {
        run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    }
}
