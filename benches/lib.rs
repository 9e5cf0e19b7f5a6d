//! Shared inputs for cleave's benches.
