//! A fence set while an urgent push is half written (a protocol switch
//! while an interim reply goes out) does not split that push.

use cleave_proto::conn::{Conn, Framed, Raw};
use cleave_proto::{Bytes, Lines, WriteQueue};
use core::time::Duration;

/// Drains `queue` completely, one full write per drain.
fn drain_all(queue: &mut WriteQueue, out: &mut Vec<u8>) {
    while !queue.is_flushed() {
        let presented = {
            let mut slices = [&b""[..]; 8];
            let n = queue.chunks(&mut slices);
            slices[..n].concat()
        };
        out.extend_from_slice(&presented);
        queue.advance(presented.len()).unwrap();
    }
}

#[test]
fn a_fence_does_not_split_an_urgent_push_in_progress() {
    let mut queue = WriteQueue::new();
    queue.push(Bytes::from_static(b"BULK")).unwrap();
    let urgent = Bytes::from(vec![b'U'; 1000]);
    queue.push_urgent(urgent).unwrap();
    // The urgent push goes first; the writer takes half of it.
    let presented = {
        let mut slices = [&b""[..]; 8];
        let n = queue.chunks(&mut slices);
        slices[..n].concat()
    };
    assert_eq!(presented[0], b'U');
    queue.advance(500).unwrap();
    let mut out = presented[..500].to_vec();
    // Now a protocol switch fences the bulk lane.
    queue.fence();
    drain_all(&mut queue, &mut out);
    let at = out.windows(4).position(|w| w == b"BULK");
    assert_eq!(out.len(), 1004);
    assert_eq!(
        at,
        Some(1000),
        "the 1000-byte urgent push was split by the bulk bytes"
    );
}

/// The same through `Conn`: an urgent reply half written when the
/// connection switches protocols.
#[test]
fn a_switch_does_not_split_an_urgent_push_in_progress() {
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.push(Bytes::from_static(b"bulk\n")).unwrap();
    let mut urgent = vec![b'u'; 999];
    urgent.push(b'\n');
    conn.push_urgent(Bytes::from(urgent.clone())).unwrap();
    let chunk = conn.poll_transmit_chunk().unwrap();
    assert_eq!(chunk[0], b'u');
    conn.handle_written(300, Duration::ZERO).unwrap();
    let mut out = chunk[..300].to_vec();
    let mut conn = conn.switch(|_lines| Raw::new());
    while let Some(chunk) = conn.poll_transmit_chunk() {
        out.extend_from_slice(&chunk);
        conn.handle_written(chunk.len(), Duration::ZERO).unwrap();
    }
    assert_eq!(out.len(), urgent.len() + 5);
    let at = out.windows(5).position(|w| w == b"bulk\n");
    assert_eq!(
        at,
        Some(urgent.len()),
        "the 1000-byte urgent push was split by the bulk bytes"
    );
}
