//! [`Checksum`]: the algorithms of checked frames, and
//! [`ChecksumMismatch`], what a failed check reports. Apart from the codec
//! so that the error types can name the mismatch without depending on the
//! decoder.

use core::fmt;

/// The checksum algorithm of a checked stream.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Checksum {
    /// No checksum: the length and the payload only.
    None,
    /// CRC-16/XMODEM (poly 0x1021, init 0, no reflection), 2 bytes.
    Crc16,
    /// CRC-32/ISO-HDLC (poly 0x04C11DB7 reflected, as zlib and crc32fast
    /// compute it), 4 bytes. Not CRC-32C (Castagnoli).
    Crc32,
    /// XXH3-64 with seed 0, 8 bytes. Needs the `xxh3` feature.
    Xxh3,
}

/// CRC-16/XMODEM with a slice-by-16 table.
static CRC16: crc::Crc<u16, crc::Table<16>> =
    crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_XMODEM);

/// CRC-32/ISO-HDLC for builds without `std` (crc32fast, with `std`, picks SIMD at run time).
#[cfg(not(feature = "std"))]
static CRC32: crc::Crc<u32, crc::Table<16>> =
    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISO_HDLC);

impl Checksum {
    /// Bytes the checksum takes on the wire: 0, 2, 4 or 8.
    #[must_use]
    pub const fn width(self) -> usize {
        match self {
            Self::None => 0,
            Self::Crc16 => 2,
            Self::Crc32 => 4,
            Self::Xxh3 => 8,
        }
    }

    /// Whether this build can compute it: [`Xxh3`](Self::Xxh3) needs the
    /// `xxh3` feature; the others are always there.
    #[must_use]
    pub const fn is_available(self) -> bool {
        !matches!(self, Self::Xxh3) || cfg!(feature = "xxh3")
    }

    /// The checksum of `data`, widened to a `u64` (0 for
    /// [`None`](Self::None), and for [`Xxh3`](Self::Xxh3) in a build
    /// without the `xxh3` feature, where no decoder or encoder can be made
    /// with it).
    #[inline]
    #[must_use]
    pub fn compute(self, data: &[u8]) -> u64 {
        match self {
            Self::None => 0,
            Self::Crc16 => u64::from(CRC16.checksum(data)),
            Self::Crc32 => u64::from(crc32(data)),
            Self::Xxh3 => xxh3(data),
        }
    }

    /// The name flatstream's golden files use: `default`, `crc16`,
    /// `crc32`, `xxhash64`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "default",
            Self::Crc16 => "crc16",
            Self::Crc32 => "crc32",
            Self::Xxh3 => "xxhash64",
        }
    }
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "no checksum",
            Self::Crc16 => "CRC-16/XMODEM",
            Self::Crc32 => "CRC-32/ISO-HDLC",
            Self::Xxh3 => "XXH3-64",
        })
    }
}

#[cfg(feature = "std")]
#[inline]
fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

#[cfg(not(feature = "std"))]
#[inline]
fn crc32(data: &[u8]) -> u32 {
    CRC32.checksum(data)
}

#[cfg(feature = "xxh3")]
#[inline]
fn xxh3(data: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(data)
}

#[cfg(not(feature = "xxh3"))]
#[inline]
fn xxh3(_: &[u8]) -> u64 {
    0
}

/// A payload that does not match the checksum sent with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChecksumMismatch {
    /// The algorithm.
    pub checksum: Checksum,
    /// The checksum the frame carried.
    pub expected: u64,
    /// The checksum of the payload as received.
    pub calculated: u64,
}

impl fmt::Display for ChecksumMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.checksum.width() * 2;
        write!(
            f,
            "{} mismatch: the frame says {:#0w$x}, the payload gives {:#0w$x}",
            self.checksum,
            self.expected,
            self.calculated,
            w = digits + 2,
        )
    }
}
