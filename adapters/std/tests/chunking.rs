//! Chunking invariance and byte conservation through `Stream`, in memory:
//! however the reader cuts the input, and wherever reads time out, the
//! same frames come out as from the whole input at once; however the
//! writer takes its bytes, and wherever writes time out, the same bytes go
//! out once each.

use std::io::{self, Read, Write};
use std::time::Duration;

use cleave_proto::{
    Bytes, Conn, ConnConfig, Decoder, Error, Framed, LengthPrefixed, Lines, LinesConfig,
};
use cleave_std::{ConnError, Socket, Stream};
use proptest::prelude::*;

/// A reader that hands out its input in the given pieces (at most what the
/// caller has room for), and times out before the pieces marked so.
struct Pieces {
    data: Vec<u8>,
    pos: usize,
    sizes: Vec<usize>,
    stalls: Vec<bool>,
    turn: usize,
    stalled: bool,
}

impl Read for Pieces {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let turn = self.turn % self.sizes.len();
        if self.stalls[turn] && !self.stalled {
            self.stalled = true;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.stalled = false;
        self.turn += 1;
        let n = self.sizes[turn]
            .min(buf.len())
            .min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Read-only, no timeouts: the defaults.
impl Socket for Pieces {}

/// Every frame, then the final error if any, retrying on timeouts.
fn through_stream<D: Decoder<Item = Bytes>>(
    decoder: D,
    data: &[u8],
    sizes: Vec<usize>,
    stalls: Vec<bool>,
) -> (Vec<Bytes>, Option<Error>, usize) {
    let reader = Pieces {
        data: data.to_vec(),
        pos: 0,
        sizes,
        stalls,
        turn: 0,
        stalled: false,
    };
    let mut stream = Stream::new(reader, Framed::new(decoder));
    let (mut frames, mut timeouts) = (Vec::new(), 0);
    loop {
        match stream.recv() {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => return (frames, None, timeouts),
            Err(ConnError::TimedOut) => timeouts += 1,
            Err(ConnError::Protocol(e)) => return (frames, Some(e), timeouts),
            Err(e) => panic!("{e}"),
        }
    }
}

/// The same, fed whole to the core.
fn whole<D: Decoder<Item = Bytes>>(decoder: D, data: &[u8]) -> (Vec<Bytes>, Option<Error>) {
    let mut framed = Conn::new(Framed::new(decoder), Duration::ZERO);
    framed.feed(data, Duration::ZERO).unwrap();
    framed.handle_eof(Duration::ZERO);
    let mut frames = Vec::new();
    loop {
        match framed.poll_event() {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => return (frames, None),
            Err(e) => return (frames, Some(e)),
        }
    }
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop_oneof![3 => any::<u8>(), 1 => Just(b'\n')], 0..3000)
}

fn cuts() -> impl Strategy<Value = (Vec<usize>, Vec<bool>)> {
    prop::collection::vec((1usize..200, prop::bool::weighted(0.2)), 1..40)
        .prop_map(|v| v.into_iter().unzip())
}

proptest! {
    #[test]
    fn lines_come_out_the_same_however_cut_and_stalled(data in input(), (sizes, stalls) in cuts()) {
        let config = LinesConfig::default().max_length(64);
        let expected = whole(Lines::with_config(config), &data);
        let (frames, error, timeouts) =
            through_stream(Lines::with_config(config), &data, sizes, stalls.clone());
        prop_assert_eq!((frames, error), expected);
        if stalls.iter().all(|&s| !s) {
            prop_assert_eq!(timeouts, 0);
        }
    }

    #[test]
    fn length_prefixed_frames_lose_no_byte(
        bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20),
        cut in 0usize..4,
        (sizes, stalls) in cuts(),
    ) {
        let mut data = Vec::new();
        for body in &bodies {
            data.extend_from_slice(&(body.len() as u32).to_be_bytes());
            data.extend_from_slice(body);
        }
        // Maybe end inside the last frame.
        let data = &data[..data.len().saturating_sub(cut)];
        let (frames, error, _) = through_stream(LengthPrefixed::new(), data, sizes, stalls);
        prop_assert_eq!((frames.clone(), error.clone()), whole(LengthPrefixed::new(), data));
        // Every byte is in a frame, its header, or the partial frame.
        let partial = match &error {
            Some(Error::Truncated { partial, .. }) => partial.len(),
            None => 0,
            Some(e) => return Err(TestCaseError::fail(e.to_string())),
        };
        let framed: usize = frames.iter().map(|f| f.len() + 4).sum();
        prop_assert_eq!(framed + partial, data.len());
    }

    #[test]
    fn checked_frames_lose_no_byte_and_stop_at_a_bad_checksum(
        bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20),
        corrupt in prop::option::of(0usize..20),
        cut in 0usize..4,
        (sizes, stalls) in cuts(),
    ) {
        use cleave_proto::{Checked, Checksum, Encoder, InvalidInput};
        let codec = || Checked::new(Checksum::Crc16).unwrap();
        let mut data = Vec::new();
        let mut starts = Vec::new();
        for (i, body) in bodies.iter().enumerate() {
            let frame = codec().encode(Bytes::from(body.clone())).unwrap();
            starts.push(data.len());
            data.extend_from_slice(frame.head());
            if corrupt == Some(i) {
                data[starts[i] + 4] ^= 0x80; // the checksum
            }
            data.extend_from_slice(frame.body());
        }
        let data = &data[..data.len().saturating_sub(cut)];
        let (frames, error, _) = through_stream(codec(), data, sizes, stalls);
        prop_assert_eq!((frames.clone(), error.clone()), whole(codec(), data));
        let framed: usize = frames.iter().map(|f| f.len() + 6).sum();
        match &error {
            None => prop_assert_eq!(framed, data.len()),
            Some(Error::Truncated { partial, .. }) => {
                prop_assert_eq!(framed + partial.len(), data.len())
            }
            Some(Error::InvalidInput { kind: InvalidInput::Checksum(_), offset }) => {
                // Stopped at the corrupted frame, every frame before it out.
                prop_assert_eq!(Some(*offset as usize), corrupt.map(|i| starts[i]));
                prop_assert_eq!(framed, *offset as usize);
            }
            Some(e) => return Err(TestCaseError::fail(e.to_string())),
        }
    }

    #[test]
    fn writes_that_time_out_or_take_little_lose_nothing(
        writes in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..2000), 0..40),
        takes in prop::collection::vec((1usize..700, prop::bool::weighted(0.3)), 1..20),
    ) {
        let mut takes = takes;
        takes[0].1 = false; // some turn takes something
        let sink = Sink { out: Vec::new(), takes, turn: 0 };
        let queue = cleave_proto::WriteQueueConfig::default().max_bytes(4096).unwrap();
        let config = ConnConfig::default().write_queue(queue);
        let mut stream = Stream::with_config(sink, Framed::new(Lines::new()), config);
        for write in &writes {
            let mut bytes = Bytes::from(write.clone());
            // push, and on a full queue write (retrying timeouts) to make room.
            while let Err(rejected) = stream.conn_mut().push(bytes) {
                bytes = rejected.into_value();
                retry(|| stream.flush());
            }
            let queue = stream.conn().queue();
            prop_assert!(queue.len() <= 4096 || queue.items() == 1);
        }
        retry(|| stream.flush());
        let (sink, conn) = stream.into_parts();
        prop_assert!(conn.queue().is_empty());
        prop_assert_eq!(sink.out, writes.concat());
    }
}

/// Calls `f` until it does not time out.
fn retry(mut f: impl FnMut() -> Result<(), ConnError>) {
    loop {
        match f() {
            Ok(()) => return,
            Err(ConnError::TimedOut) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// A writer that takes the given amounts, or times out, in turn.
struct Sink {
    out: Vec<u8>,
    takes: Vec<(usize, bool)>,
    turn: usize,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (take, stall) = self.takes[self.turn % self.takes.len()];
        self.turn += 1;
        if stall {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = take.min(buf.len());
        self.out.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Write-only, no timeouts: the defaults.
impl Socket for Sink {}
