//! Sniffing cost per connection, beside the parsers a user would reach
//! for, on the same captured bytes: whole, and arriving in 64-byte pieces
//! (each sniffer is asked again after every piece, on all the bytes so far,
//! as a router does, resuming where it stopped; the peers are asked the way
//! their APIs allow).
//!
//! The `trickle_*` groups feed 16 KiB first flights one byte at a time
//! (a ClientHello in one-byte records, a request head, a PROXY v2 header
//! with an 8 KiB TLV) to the resumable sniffers, beside the whole input at
//! once and beside the pure function asked again on everything after each
//! byte (what a router did before it resumed): the ratio of one-byte pieces
//! to the whole input is the cost of trickled bytes.
//!
//! Run: `cargo bench -p cleave-benches --bench sniff`.

use std::hint::black_box;
use std::time::Duration;

use cleave_proto::sniff::{http, proxy, tls, Sniff};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

#[path = "../core/tests/support/flights.rs"]
mod flights;

const TLS_HELLO: &[u8] = include_bytes!("../core/tests/fixtures/tls_curl.bin");
const PROXY_V1: &[u8] = include_bytes!("../core/tests/fixtures/proxy_v1_tcp4.bin");
const PROXY_V2: &[u8] = include_bytes!("../core/tests/fixtures/proxy_v2_tlvs.bin");
const HTTP_GET: &[u8] = include_bytes!("../core/tests/fixtures/http_curl_get.bin");

const MODES: [(&str, usize); 2] = [("whole", usize::MAX), ("pieces_64", 64)];

/// Asks `sniff` after every piece, on everything so far, until it answers.
fn by_pieces<T>(data: &[u8], piece: usize, mut sniff: impl FnMut(&[u8]) -> Sniff<T>) -> Sniff<T> {
    let mut end = piece.min(data.len());
    loop {
        let answer = sniff(&data[..end]);
        if !answer.is_need_more() || end == data.len() {
            return answer;
        }
        end = (end + piece).min(data.len());
    }
}

/// Asks a resumable sniffer after every piece, on everything so far, until it
/// answers, and reads the facts from the final answer by reference (what
/// the peers return: a length, a port), without cloning them.
macro_rules! sniff_pieces {
    ($data:expr, $piece:expr, |$d:ident| $ask:expr, |$answer:ident| $read:expr) => {{
        let (data, piece) = ($data, $piece);
        let mut end = piece.min(data.len());
        loop {
            let $d = &data[..end];
            let $answer = $ask;
            if !$answer.is_need_more() || end == data.len() {
                break $read;
            }
            end = (end + piece).min(data.len());
        }
    }};
}

/// rustls: `Acceptor::read_tls` each piece, `accept` until the hello is
/// complete, then the server name.
fn rustls_sni(data: &[u8], piece: usize) -> Option<usize> {
    let mut acceptor = rustls::server::Acceptor::default();
    for chunk in data.chunks(piece.min(data.len())) {
        let mut reader = chunk;
        acceptor.read_tls(&mut reader).expect("reads");
        if let Some(accepted) = acceptor.accept().map_err(|(e, _)| e).expect("valid hello") {
            return accepted.client_hello().server_name().map(str::len);
        }
    }
    None
}

fn sni(c: &mut Criterion) {
    let mut group = c.benchmark_group("tls_client_hello_517B");
    let ours = |d: &[u8], piece: usize| -> Option<usize> {
        let mut sniffer = tls::Sniffer::new();
        sniff_pieces!(
            d,
            piece,
            |d| sniffer.sniff(d, tls::DEFAULT_MAX_HELLO),
            |answer| black_box(answer)
                .facts()
                .and_then(|h| h.server_name.as_ref().map(String::len))
        )
    };
    for (mode, piece) in MODES {
        let expected = Some("example.com".len());
        let got = ours(TLS_HELLO, piece);
        assert_eq!((got, rustls_sni(TLS_HELLO, piece)), (expected, expected));
        group.bench_function(BenchmarkId::new("cleave_tls_sniff", mode), |b| {
            b.iter(|| black_box(ours(black_box(TLS_HELLO), piece)))
        });
        group.bench_function(BenchmarkId::new("rustls_acceptor", mode), |b| {
            b.iter(|| black_box(rustls_sni(black_box(TLS_HELLO), piece)))
        });
    }
    group.finish();
}

/// ppp: parse the header once it is complete (it has no partial answer of
/// its own for v1, and reports "incomplete" for v2).
fn ppp_v1(data: &[u8], piece: usize) -> Option<u16> {
    let mut end = piece.min(data.len());
    loop {
        if let Some(line_end) = data[..end].windows(2).position(|w| w == b"\r\n") {
            let line = std::str::from_utf8(&data[..line_end + 2]).ok()?;
            return match ppp::v1::Header::try_from(line).ok()?.addresses {
                ppp::v1::Addresses::Tcp4(a) => Some(a.source_port),
                _ => None,
            };
        }
        if end == data.len() {
            return None;
        }
        end = (end + piece).min(data.len());
    }
}

fn ppp_v2(data: &[u8], piece: usize) -> Option<u16> {
    let header = ppp_v2_header(data, piece)?;
    match header.addresses {
        ppp::v2::Addresses::IPv4(a) => Some(a.source_port),
        _ => None,
    }
}

/// ppp's v2 header, parsed as the bytes arrive in pieces.
fn ppp_v2_header(data: &[u8], piece: usize) -> Option<ppp::v2::Header<'_>> {
    let mut end = piece.min(data.len());
    loop {
        match ppp::v2::Header::try_from(&data[..end]) {
            Ok(header) => return Some(header),
            Err(_) if end < data.len() => end = (end + piece).min(data.len()),
            Err(_) => return None,
        }
    }
}

/// ppp, then what cleave also does: read every TLV into owned values and
/// check the CRC32C, with the same slice-by-16 table as cleave, on the
/// header ppp parsed (once), the CRC's place taken from its TLV. The same
/// facts for the same work.
fn ppp_v2_full(data: &[u8], piece: usize) -> Option<u16> {
    static CRC32C: crc::Crc<u32, crc::Table<16>> =
        crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);
    let header = ppp_v2_header(data, piece)?;
    let port = match header.addresses {
        ppp::v2::Addresses::IPv4(a) => a.source_port,
        _ => return None,
    };
    let raw = header.as_bytes();
    let mut owned: Vec<(u8, Vec<u8>)> = Vec::new();
    let mut crc_ok = true;
    for tlv in header.tlvs() {
        match tlv.ok()? {
            ppp::v2::TypeLengthValue { kind: 0x03, value } => {
                let expected = u32::from_be_bytes(value.as_ref().try_into().ok()?);
                // The value is a view of the header's bytes.
                let at = (value.as_ptr() as usize).checked_sub(raw.as_ptr() as usize)?;
                let mut digest = CRC32C.digest();
                digest.update(&raw[..at]);
                digest.update(&[0; 4]);
                digest.update(&raw[at + 4..]);
                crc_ok = digest.finalize() == expected;
            }
            ppp::v2::TypeLengthValue { kind, value } => owned.push((kind, value.to_vec())),
        }
    }
    black_box(owned);
    crc_ok.then_some(port)
}

/// A peer's parse: the source port, from bytes arriving in pieces.
type Peer = fn(&[u8], usize) -> Option<u16>;

fn proxy_header(c: &mut Criterion) {
    let ours = |d: &[u8], piece: usize| -> Option<u16> {
        let mut sniffer = proxy::Sniffer::new();
        sniff_pieces!(
            d,
            piece,
            |d| sniffer.sniff(d, proxy::DEFAULT_MAX_HEADER),
            |answer| black_box(answer)
                .facts()
                .and_then(|h| h.source())
                .map(|s| s.port())
        )
    };
    let port = ours;
    let v1: &[(&str, Peer)] = &[("ppp", ppp_v1)];
    let v2: &[(&str, Peer)] = &[
        ("ppp_addresses_only", ppp_v2),
        ("ppp_tlvs_read_crc_checked", ppp_v2_full),
    ];
    for (name, data, peers) in [
        ("proxy_v1_tcp4_44B", PROXY_V1, v1),
        ("proxy_v2_tlvs_104B", PROXY_V2, v2),
    ] {
        let mut group = c.benchmark_group(name);
        for (mode, piece) in MODES {
            assert!(port(data, piece).is_some());
            group.bench_function(BenchmarkId::new("cleave_proxy_sniff", mode), |b| {
                b.iter(|| black_box(ours(black_box(data), piece)))
            });
            for &(peer, theirs) in peers {
                assert_eq!(port(data, piece), theirs(data, piece), "{peer}");
                group.bench_function(BenchmarkId::new(peer, mode), |b| {
                    b.iter(|| black_box(theirs(black_box(data), piece)))
                });
            }
        }
        group.finish();
    }
}

/// httparse alone: parse until complete, then look the Host up.
fn raw_httparse(data: &[u8], piece: usize) -> Option<usize> {
    let mut end = piece.min(data.len());
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&data[..end]) {
            Ok(httparse::Status::Complete(_)) => {
                return request
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("host"))
                    .map(|h| h.value.len())
            }
            Ok(httparse::Status::Partial) if end < data.len() => {
                end = (end + piece).min(data.len())
            }
            _ => return None,
        }
    }
}

fn http_head(c: &mut Criterion) {
    let ours = |d: &[u8], piece: usize| -> Option<usize> {
        let mut sniffer = http::Sniffer::new();
        sniff_pieces!(
            d,
            piece,
            |d| sniffer.sniff(d, http::DEFAULT_MAX_HEAD, http::DEFAULT_MAX_HEADERS),
            |answer| black_box(answer)
                .facts()
                .and_then(|h| h.host().map(str::len))
        )
    };
    let mut group = c.benchmark_group("http_request_head_89B");
    for (mode, piece) in MODES {
        let host = ours(HTTP_GET, piece);
        assert_eq!(host, raw_httparse(HTTP_GET, piece));
        group.bench_function(BenchmarkId::new("cleave_http_sniff", mode), |b| {
            b.iter(|| black_box(ours(black_box(HTTP_GET), piece)))
        });
        group.bench_function(BenchmarkId::new("raw_httparse", mode), |b| {
            b.iter(|| black_box(raw_httparse(black_box(HTTP_GET), piece)))
        });
    }
    group.finish();
}

/// Asks a resumable sniffer after every `piece` bytes, on everything so far,
/// until it answers; whether it matched. A router does the same: it keeps
/// the answer by reference and clones only a final one.
fn resumed<S>(
    data: &[u8],
    piece: usize,
    sniffer: &mut S,
    ask: impl Fn(&mut S, &[u8]) -> Option<bool>,
) -> bool {
    let mut end = piece.min(data.len());
    loop {
        if let Some(matched) = ask(sniffer, &data[..end]) {
            return matched;
        }
        if end == data.len() {
            return false;
        }
        end = (end + piece).min(data.len());
    }
}

/// `None` while the answer may change, then whether it is a match.
fn final_match<T>(answer: &Sniff<T>) -> Option<bool> {
    (!answer.is_need_more()).then(|| answer.facts().is_some())
}

/// A 16 KiB first flight one byte at a time: the resumable sniffer asked
/// after every byte, the whole input at once, and the pure function asked
/// again on everything after every byte.
fn trickle(c: &mut Criterion) {
    type Run = Box<dyn Fn(&[u8], usize) -> bool>;
    const HEAD: usize = 16 * 1024;
    // Each asks until the answer is final, and says whether it matched.
    let cases: Vec<(&str, Vec<u8>, Run, Run)> = vec![
        (
            "trickle_tls_one_byte_records_16K",
            flights::trickled_hello(tls::DEFAULT_MAX_HELLO),
            Box::new(|d, piece| {
                resumed(d, piece, &mut tls::Sniffer::new(), |s, d| {
                    final_match(s.sniff(d, tls::DEFAULT_MAX_HELLO))
                })
            }),
            Box::new(|d, piece| {
                by_pieces(d, piece, |d| tls::sniff(d, tls::DEFAULT_MAX_HELLO))
                    .facts()
                    .is_some()
            }),
        ),
        (
            "trickle_http_head_16K",
            flights::long_head(HEAD),
            Box::new(|d, piece| {
                resumed(d, piece, &mut http::Sniffer::new(), |s, d| {
                    final_match(s.sniff(d, HEAD, 128))
                })
            }),
            Box::new(|d, piece| {
                by_pieces(d, piece, |d| http::sniff(d, HEAD, 128))
                    .facts()
                    .is_some()
            }),
        ),
        (
            "trickle_proxy_v2_8K",
            flights::proxy_v2_with_tlv(8 * 1024),
            Box::new(|d, piece| {
                resumed(d, piece, &mut proxy::Sniffer::new(), |s, d| {
                    final_match(s.sniff(d, HEAD))
                })
            }),
            Box::new(|d, piece| {
                by_pieces(d, piece, |d| proxy::sniff(d, HEAD))
                    .facts()
                    .is_some()
            }),
        ),
    ];
    for (name, data, resumed, pure) in &cases {
        assert!(
            resumed(data, usize::MAX) && resumed(data, 1) && pure(data, 1),
            "{name}"
        );
        let mut group = c.benchmark_group(*name);
        group.sample_size(10);
        group.bench_function("cleave_sniffer_whole", |b| {
            b.iter(|| black_box(resumed(black_box(data), usize::MAX)))
        });
        group.bench_function("cleave_sniffer_bytes_1", |b| {
            b.iter(|| black_box(resumed(black_box(data), 1)))
        });
        group.bench_function("pure_sniff_again_bytes_1", |b| {
            b.iter(|| black_box(pure(black_box(data), 1)))
        });
        group.finish();
    }
}

criterion_group! {
    name = sniff;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = sni, proxy_header, http_head, trickle
}
criterion_main!(sniff);
