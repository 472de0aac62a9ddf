//! Errors that name the VMI field they are about.

use std::fmt;

/// A problem with one field of the input, shown as `<path>: <message>`
/// (`spec.domain.devices.disks[1].name: volume "data" not found`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.volumes[0].emptyDisk.capacity`.
    pub path: String,
    /// What is wrong, in one sentence without a trailing period.
    pub message: String,
}

impl FieldError {
    /// A new error about `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for FieldError {}
