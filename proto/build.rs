//! Generates the ranking.v1 messages, client and server with a pure-Rust protobuf compiler
//! (no system `protoc`), and writes the descriptor set that server reflection serves.
//!
//! The server is generated in a pass of its own over the same contract, with every message
//! taken from the first pass except `GetTopNResponse`, which it sends as
//! `Encoded<GetTopNResponse>`: the home page's top 20 is read by thousands of callers between
//! two versions, and an answer kept already encoded is sent as a copy of its bytes. The bytes
//! on the wire are the message's, so callers (and the generated client) see no difference.

use std::{env, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "ranking/v1/ranking.proto";
    println!("cargo:rerun-if-changed={proto}");

    let mut compiler = protox::Compiler::new(["."])?;
    compiler.include_imports(true).open_files([proto])?;

    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("ranking_descriptor.bin"), compiler.encode_file_descriptor_set())?;

    tonic_prost_build::configure().build_server(false).compile_fds(compiler.file_descriptor_set())?;

    let server = out.join("server");
    fs::create_dir_all(&server)?;
    tonic_prost_build::configure()
        .build_client(false)
        .out_dir(&server)
        .extern_path(".ranking.v1", "crate::v1")
        .extern_path(".ranking.v1.GetTopNResponse", "crate::Encoded<crate::v1::GetTopNResponse>")
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
