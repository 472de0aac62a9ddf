//! Why a migration's input was refused: [`MigrationError`].

use crate::{BAD_OPTIONS, NO_MIGRATION_STATE, NO_OPTIONS};

/// A refusal of virt-handler's `MigrationOptions` or of the VMI's
/// `status.migrationState`. Its text is the one line virt-handler gets
/// (`Response.Message`): KubeVirt's words where KubeVirt has them (the
/// options' two messages, `cannot migrate VMI until migrationState is
/// ready`, `Memory size '...' must be greater than or equal to 0`), the
/// field named otherwise.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MigrationError {
    /// MigrateVirtualMachine carried no options: KubeVirt's
    /// [`NO_OPTIONS`].
    #[error("{NO_OPTIONS}")]
    NoOptions,
    /// The options are not a JSON object: KubeVirt's [`BAD_OPTIONS`]
    /// prefix, then the decoder's reason.
    #[error("{BAD_OPTIONS}: {reason}")]
    OptionsSyntax {
        /// The JSON decoder's message, or the JSON kind found.
        reason: String,
    },
    /// One option has the wrong JSON type or value: KubeVirt's
    /// [`BAD_OPTIONS`] prefix, the option's Go field name, the reason.
    #[error("{BAD_OPTIONS}: {field}: {reason}")]
    Option {
        /// Go's field name (`ProgressTimeout`, `Bandwidth`, ...).
        field: &'static str,
        /// What is wrong, the value cut to 64 characters.
        reason: String,
    },
    /// `Bandwidth` cannot be turned into MiB/s (negative: KubeVirt's
    /// `QuantityToMebiByte` message; out of range).
    #[error("Bandwidth: {reason}")]
    Bandwidth {
        /// KubeVirt's message, or why the quantity has no byte value.
        reason: String,
    },
    /// The VMI has no `status.migrationState`: KubeVirt's
    /// [`NO_MIGRATION_STATE`].
    #[error("{NO_MIGRATION_STATE}")]
    NoMigrationState,
    /// A field of `vmi.status` has the wrong shape or size, or
    /// `targetNodeTopology` does not decode (Go's `unexpected end of JSON
    /// input` for a missing one, as KubeVirt's `json.Unmarshal`).
    #[error("{field}: {reason}")]
    Status {
        /// The field's path from the VMI's root
        /// (`status.migrationState.targetCPUSet[1]`).
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl MigrationError {
    /// The field the refusal is about: the option's Go name, `Bandwidth`,
    /// or the status field's path; `None` for the messages about the whole
    /// request.
    pub fn field(&self) -> Option<&str> {
        match self {
            MigrationError::Option { field, .. } => Some(field),
            MigrationError::Bandwidth { .. } => Some("Bandwidth"),
            MigrationError::Status { field, .. } => Some(field),
            MigrationError::NoOptions
            | MigrationError::OptionsSyntax { .. }
            | MigrationError::NoMigrationState => None,
        }
    }

    /// A [`MigrationError::Status`] for `field` (its path from the VMI's
    /// root).
    pub(crate) fn status(field: impl Into<String>, reason: impl Into<String>) -> Self {
        MigrationError::Status {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
