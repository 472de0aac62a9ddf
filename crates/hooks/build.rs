//! Compiles the hook protocol definitions with protox (pure Rust, no protoc).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/info.proto",
        "proto/v1alpha1.proto",
        "proto/v1alpha2.proto",
        "proto/v1alpha3.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    // The server side is generated for the crate's own tests (a sidecar
    // stand-in); the launcher uses the clients only.
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
