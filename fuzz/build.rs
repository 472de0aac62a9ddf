//! The command socket's messages for the grpc_requests target, generated
//! from the `cmd` crate's own `.proto` files (read only) with protox and
//! prost-build, as `cmd`'s build script does, without its tonic services:
//! depending on `cmd` would build tonic, hyper, axum and tokio with
//! libFuzzer's instrumentation, doubling the fuzz build's time for code the
//! target never runs.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = "../crates/cmd/proto";
    let files = ["cmd.proto", "info.proto", "notify.proto", "notify_info.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={dir}/{f}");
    }
    let fds = protox::compile(files, [dir])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
