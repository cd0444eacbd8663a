// Intentionally empty: see Cargo.toml (the crate only pins a source download).
