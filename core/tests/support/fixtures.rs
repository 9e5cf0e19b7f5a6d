//! The captured first flights in `tests/fixtures` (its README says how each
//! was produced), by name and by kind.
//!
//! Shared by the integration tests (`#[path]`).

#![allow(dead_code)]

/// The bytes of fixture `name`.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// ClientHellos from openssl, curl and Python.
pub const TLS_FIXTURES: [&str; 5] = [
    "tls_openssl_sni_alpn.bin",
    "tls_openssl_no_sni.bin",
    "tls_curl.bin",
    "tls_python.bin",
    "tls_openssl_split_records.bin",
];

/// PROXY headers haproxy sent.
pub const PROXY_FIXTURES: [&str; 7] = [
    "proxy_v1_tcp4.bin",
    "proxy_v1_tcp6.bin",
    "proxy_v2_tcp4.bin",
    "proxy_v2_tcp6.bin",
    "proxy_v2_tlvs.bin",
    "proxy_v2_tlvs_no_authority.bin",
    "proxy_v2_tlvs_ssl.bin",
];

/// Every fixture: the above, two HTTP requests from curl and an SSH banner.
pub const ALL: [&str; 15] = [
    "tls_openssl_sni_alpn.bin",
    "tls_openssl_no_sni.bin",
    "tls_curl.bin",
    "tls_python.bin",
    "tls_openssl_split_records.bin",
    "proxy_v1_tcp4.bin",
    "proxy_v1_tcp6.bin",
    "proxy_v2_tcp4.bin",
    "proxy_v2_tcp6.bin",
    "proxy_v2_tlvs.bin",
    "proxy_v2_tlvs_no_authority.bin",
    "proxy_v2_tlvs_ssl.bin",
    "http_curl_get.bin",
    "http_curl_upgrade.bin",
    "ssh_openssh.bin",
];
