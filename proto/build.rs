//! Generates the ranking.v1 messages, client and server with a pure-Rust protobuf compiler
//! (no system `protoc`), and writes the descriptor set that server reflection serves.

use std::{env, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "ranking/v1/ranking.proto";
    println!("cargo:rerun-if-changed={proto}");

    let mut compiler = protox::Compiler::new(["."])?;
    compiler.include_imports(true).open_files([proto])?;

    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("ranking_descriptor.bin"), compiler.encode_file_descriptor_set())?;

    tonic_prost_build::configure().compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
