//! The `rpc_server` and `rpc_client` examples over loopback, in one
//! process: pipelined prost requests are each answered exactly once, with
//! the right result, and answers come back out of order (a `Delay` is
//! answered after the `Sum` sent behind it; only the order is checked,
//! never how long anything took); the client's check catches wrong,
//! duplicate, unknown and missing answers; and bytes that are not a
//! request end that connection with a typed error and a clean close
//! (the peer reads the end of the stream), while the server's other
//! connections go on being answered.

use std::time::Duration;

use cleave_proto::codec::message::ProstCodec;
use cleave_proto::{ConnError, Decoder, Encoder, Error, InvalidInput, VarintField};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[allow(dead_code)] // the examples' `main`s and what only they use
#[path = "../rpc_client.rs"]
mod rpc_client;

use rpc_client::rpc_server::{self, Delay, Failure, Numbers, Op, Outcome, Request, Response};
use rpc_client::{check, exchange, request};

/// A bound on every wait, so that a server that never answers fails the
/// test instead of hanging it. Nothing is asserted about durations.
const HANG: Duration = Duration::from_secs(30);

/// The server's accept loop on 127.0.0.1, a free port.
async fn start_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(rpc_server::serve(listener));
    addr
}

/// `request` as the bytes on the wire: its varint length, then the
/// message.
fn wire(request: Request) -> Vec<u8> {
    let frame = ProstCodec::<Request>::new().encode(request).unwrap();
    [frame.head(), &frame.body()[..]].concat()
}

/// Reads until the server ends the stream: the bytes before the end. A
/// reset instead of a clean end fails the test.
async fn read_to_end(socket: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    tokio::time::timeout(HANG, socket.read_to_end(&mut got))
        .await
        .expect("the server did not close the connection")
        .expect("the connection ended with an error, not a clean close");
    got
}

#[tokio::test]
async fn pipelined_requests_are_each_answered_once_rightly_and_some_out_of_order() {
    const COUNT: u64 = 500;
    // The mix starts with a Delay, then a Sum that is answered at once.
    assert_eq!(request(1).op, Some(Op::Delay(Delay { ms: 50 })));
    assert!(matches!(request(2).op, Some(Op::Sum(_))));
    let requests: Vec<Request> = (1..=COUNT).map(request).collect();
    let count = |kind: fn(&Op) -> bool| {
        requests
            .iter()
            .filter(|r| r.op.as_ref().is_some_and(kind))
            .count()
    };
    assert!(
        count(|op| matches!(op, Op::Delay(_))) > 1,
        "the mix has Delays"
    );
    assert!(
        count(|op| matches!(op, Op::Echo(_))) > 1,
        "the mix has Echos"
    );
    assert!(count(|op| matches!(op, Op::Sum(_))) > 1, "the mix has Sums");

    let addr = start_server().await;
    let socket = TcpStream::connect(addr).await.unwrap();
    let answers = tokio::time::timeout(HANG, exchange(socket, requests.clone()))
        .await
        .expect("the exchange did not finish")
        .unwrap();

    // Every id exactly once.
    let mut ids: Vec<u64> = answers.iter().map(|a| a.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=COUNT).collect::<Vec<_>>());

    // Each answer right, checked here independently of the client's check.
    for answer in &answers {
        let asked = &requests[answer.id as usize - 1];
        match (&asked.op, &answer.outcome) {
            (Some(Op::Sum(Numbers { values })), Some(Outcome::Sum(sum))) => {
                assert_eq!(
                    *sum,
                    values.iter().sum::<i64>(),
                    "sum of request {}",
                    answer.id
                );
            }
            (Some(Op::Echo(sent)), Some(Outcome::Echo(back))) => {
                assert_eq!(sent, back, "echo of request {}", answer.id);
            }
            (Some(Op::Delay(Delay { ms })), Some(Outcome::Delayed(waited))) => {
                assert_eq!(ms, waited, "delay of request {}", answer.id);
            }
            (op, outcome) => panic!("request {}: {op:?} answered {outcome:?}", answer.id),
        }
    }

    // The client's own check agrees.
    let report = check(&requests, &answers);
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(report.answered, COUNT as usize);

    // Request 1 waits; request 2, sent right behind it, does not: its
    // answer is written first.
    let position = |id: u64| answers.iter().position(|a| a.id == id).unwrap();
    assert!(
        position(2) < position(1),
        "the Sum (2) came at {}, the Delay (1) at {}",
        position(2),
        position(1)
    );
    assert!(report.out_of_order >= 1, "{report:?}");
}

#[test]
fn the_client_check_catches_wrong_duplicate_unknown_and_missing_answers() {
    let requests: Vec<Request> = (1..=5).map(request).collect();
    let right = |id: u64| {
        let outcome = match requests[id as usize - 1].op.clone().unwrap() {
            Op::Sum(Numbers { values }) => Outcome::Sum(values.iter().sum()),
            Op::Echo(bytes) => Outcome::Echo(bytes),
            Op::Delay(Delay { ms }) => Outcome::Delayed(ms),
        };
        Response {
            id,
            outcome: Some(outcome),
        }
    };

    // All right, in order.
    let all: Vec<Response> = (1..=5).map(right).collect();
    let report = check(&requests, &all);
    assert!(report.is_ok(), "{report:?}");
    assert_eq!((report.answered, report.out_of_order), (5, 0));

    // Request 4 is a Sum: a sum off by one is wrong; request 2 comes back
    // twice, an id never asked for once; 3 and 5 never.
    assert!(matches!(requests[3].op, Some(Op::Sum(_))));
    let Some(Outcome::Sum(sum)) = right(4).outcome else {
        unreachable!()
    };
    let off_by_one = Response {
        id: 4,
        outcome: Some(Outcome::Sum(sum + 1)),
    };
    let stranger = Response {
        id: 99,
        outcome: Some(Outcome::Sum(0)),
    };
    let answers = [right(2), off_by_one, right(1), right(2), stranger];
    let report = check(&requests, &answers);
    assert!(!report.is_ok());
    assert_eq!(report.answered, 3);
    assert_eq!(report.missing, [3, 5]);
    assert_eq!(report.wrong.len(), 3, "{:?}", report.wrong);
    assert!(report.wrong.iter().any(|w| w.starts_with("request 4:")));
    assert!(report.wrong.iter().any(|w| w.starts_with("id 2:")));
    assert!(report.wrong.iter().any(|w| w.starts_with("id 99:")));
    // 1 after 4, and the second 2 after 4.
    assert_eq!(report.out_of_order, 2);

    // An echo that differs, a Delay answered with another length, and an
    // answer of the wrong kind are wrong too.
    let Some(Outcome::Echo(sent)) = right(3).outcome else {
        unreachable!()
    };
    let mut changed = sent.to_vec();
    changed[0] ^= 1;
    let answers = [
        right(2),
        right(4),
        right(5),
        Response {
            id: 3,
            outcome: Some(Outcome::Echo(changed.into())),
        },
        Response {
            id: 1,
            outcome: Some(Outcome::Delayed(49)),
        },
    ];
    let report = check(&requests, &answers);
    assert_eq!(report.wrong.len(), 2, "{:?}", report.wrong);
    let kind = [Response {
        id: 2,
        outcome: Some(Outcome::Echo(Default::default())),
    }];
    assert_eq!(check(&requests[1..2], &kind).wrong.len(), 1);
}

#[tokio::test]
async fn a_payload_that_is_not_a_request_is_a_typed_error_and_a_clean_close() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).await.unwrap();
    let (socket, _) = listener.accept().await.unwrap();
    let server = tokio::spawn(rpc_server::serve_connection(socket));

    // A good request, then a 2-byte frame whose payload has a field of
    // wire type 7, which protobuf does not have.
    let good = wire(request(2));
    client.write_all(&good).await.unwrap();
    client.write_all(&[2, 0x0F, 0x00]).await.unwrap();

    // The answer to the good request may have gone out before the close;
    // nothing else does, and the end is a FIN, not a reset.
    let got = read_to_end(&mut client).await;
    if !got.is_empty() {
        let answer = ProstCodec::<Response>::new()
            .decode_eof(&mut recv_buf(&got))
            .unwrap()
            .unwrap();
        assert_eq!(answer.id, 2);
    }

    let failure = tokio::time::timeout(HANG, server)
        .await
        .unwrap()
        .unwrap()
        .expect_err("the connection ended without a failure");
    let Failure::Malformed { error, bad } = failure else {
        panic!("not a malformed-input failure: {failure}");
    };
    assert!(
        matches!(
            error,
            ConnError::Protocol(Error::InvalidInput {
                kind: InvalidInput::Message,
                offset,
            }) if offset == good.len() as u64
        ),
        "{error:?}"
    );
    let bad = bad.expect("prost's refusal");
    assert_eq!(&bad.payload[..], [0x0F, 0x00]);
    assert_eq!(bad.offset, good.len() as u64);
}

#[tokio::test]
async fn a_length_that_is_not_a_varint_is_a_typed_error_and_a_clean_close() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).await.unwrap();
    let (socket, _) = listener.accept().await.unwrap();
    let server = tokio::spawn(rpc_server::serve_connection(socket));

    // Eleven bytes that all say "more": no u64 length is that long.
    client.write_all(&[0xFF; 11]).await.unwrap();
    assert!(read_to_end(&mut client).await.is_empty());

    let failure = tokio::time::timeout(HANG, server)
        .await
        .unwrap()
        .unwrap()
        .expect_err("the connection ended without a failure");
    let Failure::Malformed { error, bad } = failure else {
        panic!("not a malformed-input failure: {failure}");
    };
    assert!(
        matches!(
            error,
            ConnError::Protocol(Error::InvalidInput {
                kind: InvalidInput::Varint(VarintField::TooLong),
                ..
            })
        ),
        "{error:?}"
    );
    assert!(bad.is_none(), "no frame was cut, none refused: {bad:?}");
}

#[tokio::test]
async fn malformed_input_ends_only_its_own_connection() {
    let addr = start_server().await;
    // A connection opened before the bad one, and used after it.
    let before = TcpStream::connect(addr).await.unwrap();

    let mut bad = TcpStream::connect(addr).await.unwrap();
    bad.write_all(&[2, 0x0F, 0x00]).await.unwrap();
    assert!(read_to_end(&mut bad).await.is_empty());

    for socket in [before, TcpStream::connect(addr).await.unwrap()] {
        let requests: Vec<Request> = (1..=50).map(request).collect();
        let answers = tokio::time::timeout(HANG, exchange(socket, requests.clone()))
            .await
            .expect("the exchange did not finish")
            .unwrap();
        let report = check(&requests, &answers);
        assert!(report.is_ok(), "{report:?}");
        assert_eq!(report.answered, 50);
    }
}

/// A receive buffer holding `bytes`.
fn recv_buf(bytes: &[u8]) -> cleave_proto::RecvBuf {
    let mut buf = cleave_proto::RecvBuf::new();
    buf.feed(bytes).unwrap();
    buf
}
