//! `WriteQueue` under random pushes, partial writes, drains and closes, with
//! random limits: everything accepted comes out in order, once, frames
//! whole; tickets complete exactly when their bytes are written; limits
//! hold at every step.

#![no_main]

use cleave_proto::WriteQueueConfig;
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/queue_model.rs"]
mod queue_model;

use queue_model::Op;

/// Reads the configuration, then one operation per 4 bytes.
fn parse(data: &[u8]) -> Option<(WriteQueueConfig, Vec<Op>)> {
    let (knobs, rest) = data.split_first_chunk::<9>()?;
    let n = |i: usize, scale: usize| usize::from(knobs[i]) * scale + 1;
    let config = WriteQueueConfig::default()
        .max_items(n(0, 1) % 16 + 1)
        .ok()?
        .max_bytes(n(1, 32))
        .ok()?
        .urgent_max_items(n(2, 1) % 4 + 1)
        .ok()?
        .urgent_max_bytes(n(3, 4))
        .ok()?
        .coalesce_below(n(4, 4) - 1)
        .coalesce_limit(n(5, 16))
        .ok()?
        .piece_size(n(6, 8))
        .ok()?
        .max_slices(n(7, 1) % 12 + 1)
        .ok()?
        .max_drain_bytes(n(8, 32))
        .ok()?;
    let ops = rest
        .chunks_exact(4)
        .map(|op| match op[0] % 16 {
            0..=6 => Op::Push {
                urgent: op[0] & 0x80 != 0,
                len: 10 + usize::from(op[1]) * (1 + usize::from(op[0] >> 4 & 3) * 8),
                cuts: (op[2], op[3]),
                shape: op[0] >> 6,
            },
            7 => Op::Empty {
                urgent: op[1] & 1 != 0,
            },
            8..=12 => Op::Write {
                room: usize::from(op[1] % 12),
                share: op[2],
                between: op[3] & 7 == 0,
            },
            13 => Op::Peek {
                room: usize::from(op[1] % 12),
            },
            14 => Op::Close,
            _ if op[1] == 0xA5 => Op::Abort,
            _ => Op::Close,
        })
        .collect();
    Some((config, ops))
}

fuzz_target!(|data: &[u8]| {
    if let Some((config, ops)) = parse(data) {
        queue_model::run(config, &ops);
    }
});
