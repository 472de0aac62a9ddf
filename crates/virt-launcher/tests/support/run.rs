//! Running a helper command in a test.

use std::process::{Command, Output};

/// Runs `cmd` to its end and returns its output, which must be a success
/// (else the test fails with the command's standard error).
pub fn output_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
