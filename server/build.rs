//! Rebuilds the server when the console's built assets change: they are embedded in the
//! binary, and a file the console's build adds would otherwise go unnoticed. The folder is
//! created empty when the console has not been built, so its first build is noticed too.

fn main() {
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../console/dist");
    if !dist.exists() {
        let _ = std::fs::create_dir_all(&dist);
    }
    println!("cargo:rerun-if-changed=../console/dist");
}
