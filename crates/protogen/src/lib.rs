//! The gRPC code of `crates/cmd` and `crates/hooks`, generated from their
//! `.proto` files by `protox` (a pure-Rust protobuf compiler, no `protoc`)
//! and `tonic-prost-build`, and checked in under each crate's
//! `src/generated/`.
//!
//! Why checked in rather than made by build scripts: the generators (protox,
//! prost-build, tonic-build and their ~35 crates: miette, logos, petgraph,
//! prettyplease, regex, ...) and the runs of both scripts then leave every
//! build of the launcher, the release build included (issue 20, item 5).
//! `tests/generated.rs` regenerates the code and compares it byte for byte
//! with the checked-in files, so a `.proto` edit without regeneration fails
//! the tests; with `PROTOGEN_UPDATE=1` it rewrites them (and fails, so that
//! it is never left on).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One crate whose gRPC code is generated: its directory below the
/// workspace root, its `.proto` files (relative to `<dir>/proto`, which is
/// also the only include path).
#[derive(Debug, Clone, Copy)]
pub struct ProtoCrate {
    /// The crate's directory relative to the workspace root (`crates/cmd`).
    pub dir: &'static str,
    /// The `.proto` files compiled, relative to `<dir>/proto`.
    pub protos: &'static [&'static str],
}

/// Both crates. Each gets a client and a server for every service: `cmd`
/// serves the commands and calls notify; the hooks' servers are the
/// sidecar stand-ins of the crate's own tests (the launcher uses the
/// clients only).
pub const CRATES: [ProtoCrate; 2] = [
    ProtoCrate {
        dir: "crates/cmd",
        protos: &[
            "cmd.proto",
            "info.proto",
            "notify.proto",
            "notify_info.proto",
        ],
    },
    ProtoCrate {
        dir: "crates/hooks",
        protos: &[
            "info.proto",
            "v1alpha1.proto",
            "v1alpha2.proto",
            "v1alpha3.proto",
        ],
    },
];

/// Where the generated files of a crate are checked in, below its directory.
pub const GENERATED_DIR: &str = "src/generated";

/// The workspace root (this crate lives in `<root>/crates/protogen`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

/// Compiles `krate`'s `.proto` files below `root` and returns the generated
/// files, by name (one per protobuf package: `kubevirt.cmd.v1.rs`, ...).
///
/// # Errors
/// A message naming the crate when a `.proto` file does not compile, when
/// the generator fails, or when its output cannot be read back.
pub fn generate(root: &Path, krate: &ProtoCrate) -> Result<BTreeMap<String, String>, String> {
    let proto_dir = root.join(krate.dir).join("proto");
    let files: Vec<PathBuf> = krate.protos.iter().map(|f| proto_dir.join(f)).collect();
    let fds = protox::compile(&files, [&proto_dir])
        .map_err(|e| format!("{}: compiling the .proto files: {e}", krate.dir))?;
    let out = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .emit_rerun_if_changed(false)
        .out_dir(out.path())
        .compile_fds(fds)
        .map_err(|e| format!("{}: generating the code: {e}", krate.dir))?;
    let mut generated = BTreeMap::new();
    let entries = std::fs::read_dir(out.path())
        .map_err(|e| format!("reading {}: {e}", out.path().display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("reading {}: {e}", out.path().display()))?
            .path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                format!(
                    "{}: a generated file name that is not UTF-8",
                    path.display()
                )
            })?
            .to_owned();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        generated.insert(name, text);
    }
    Ok(generated)
}
