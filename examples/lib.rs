//! Runnable examples of cleave; see the `[[example]]` entries in Cargo.toml.
