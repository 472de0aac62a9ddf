//! Compiles the protocol definitions with protox (pure Rust, no protoc).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/cmd.proto",
        "proto/info.proto",
        "proto/notify.proto",
        "proto/notify_info.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
