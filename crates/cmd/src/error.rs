//! Why a command failed, as virt-handler reads it: the text of
//! `Response.message` (or of the gRPC status, for Exec and GuestPing).
//! Where virt-handler or KubeVirt's own clients compare a message, the
//! variant carries KubeVirt's exact words (KubeVirt v1.6.6
//! `pkg/virt-launcher/virtwrap/cmd-server/server.go`, `manager.go` and
//! `errors/errors.go`).

/// KubeVirt's message for a request whose VMI does not decode.
pub const NO_VALID_VMI: &str = "No valid vmi object present in command server request";
/// KubeVirt's exact message virt-handler matches when cancelling a
/// migration that is not running.
pub const NOT_MIGRATING: &str = "failed to cancel migration - vmi is not migrating";

/// A failed command. `Display` is the message virt-handler sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The request carries no VMI, or one that does not decode: KubeVirt's
    /// [`NO_VALID_VMI`], followed by why (`: <decoding error>`) when known.
    #[error("{NO_VALID_VMI}{}", why_suffix(.0))]
    NoValidVmi(Option<String>),
    /// The request's VMI has another UID than the VMI this launcher runs.
    #[error(
        "VMI {namespace}/{name} with UID {uid:?} is not the VMI this launcher runs (UID {ours:?})"
    )]
    OtherUid {
        /// The request's VMI namespace.
        namespace: String,
        /// The request's VMI name.
        name: String,
        /// The request's VMI UID.
        uid: String,
        /// This launcher's VMI UID.
        ours: String,
    },
    /// The synced VMI has another name or namespace than this launcher's.
    #[error(
        "VMI {namespace}/{name} is not the VMI this launcher runs ({ours_namespace}/{ours_name})"
    )]
    OtherVmi {
        /// The request's VMI namespace.
        namespace: String,
        /// The request's VMI name.
        name: String,
        /// This launcher's VMI namespace.
        ours_namespace: String,
        /// This launcher's VMI name.
        ours_name: String,
    },
    /// A request value is out of range (`timeoutSeconds: -1 is negative`,
    /// a missing migration options object): the message names the field.
    #[error("{0}")]
    BadRequest(String),
    /// CancelVirtualMachineMigration while no migration runs: KubeVirt's
    /// [`NOT_MIGRATING`], which virt-handler matches.
    #[error("{NOT_MIGRATING}")]
    NotMigrating,
    /// libvirt refused, as KubeVirt shows it (`FormatLibvirtError`):
    /// `LibvirtError(Code=42, Domain=10, Message='Domain not found.')`.
    #[error("LibvirtError(Code={code}, Domain={domain}, Message='{message}')")]
    Libvirt {
        /// `virErrorNumber`.
        code: i32,
        /// `virErrorDomain`.
        domain: i32,
        /// libvirt's message.
        message: String,
    },
    /// A guest agent request (Exec, GuestPing) names another domain than
    /// this launcher's.
    #[error("Domain not found: no domain with matching name '{0}'")]
    NoSuchDomain(String),
    /// SoftReboot of a guest without a connected agent and with ACPI off:
    /// KubeVirt's message.
    #[error("VMI neither have the agent connected nor the ACPI feature enabled")]
    NoAgentNoAcpi,
    /// A command whose feature is not built yet: `not supported yet:
    /// <feature>` (never a silent success).
    #[error("not supported yet: {0}")]
    NotSupported(String),
    /// Any other failure, its one-line message as it is (a conversion or
    /// volume error naming the field, a guest agent error, ...).
    #[error("{0}")]
    Failed(String),
    /// The handler's call did not run to its end (its task panicked).
    #[error("internal error: {0}")]
    Internal(String),
}

fn why_suffix(why: &Option<String>) -> String {
    why.as_ref().map(|w| format!(": {w}")).unwrap_or_default()
}

impl CommandError {
    /// [`CommandError::NotSupported`] for `feature`.
    pub fn not_supported(feature: &str) -> Self {
        CommandError::NotSupported(feature.to_owned())
    }
}

impl From<String> for CommandError {
    fn from(message: String) -> Self {
        CommandError::Failed(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_kubevirts_where_virt_handler_reads_them() {
        assert_eq!(CommandError::NoValidVmi(None).to_string(), NO_VALID_VMI);
        assert_eq!(
            CommandError::NoValidVmi(Some("kind: \"VM\"".into())).to_string(),
            format!("{NO_VALID_VMI}: kind: \"VM\"")
        );
        assert_eq!(
            CommandError::NotMigrating.to_string(),
            "failed to cancel migration - vmi is not migrating"
        );
        assert_eq!(
            CommandError::Libvirt {
                code: 42,
                domain: 10,
                message: "Domain not found.".into()
            }
            .to_string(),
            "LibvirtError(Code=42, Domain=10, Message='Domain not found.')"
        );
        assert_eq!(
            CommandError::NoAgentNoAcpi.to_string(),
            "VMI neither have the agent connected nor the ACPI feature enabled"
        );
        assert_eq!(
            CommandError::not_supported("SEV").to_string(),
            "not supported yet: SEV"
        );
        assert_eq!(
            CommandError::OtherUid {
                namespace: "n".into(),
                name: "v".into(),
                uid: "u2".into(),
                ours: "u1".into()
            }
            .to_string(),
            "VMI n/v with UID \"u2\" is not the VMI this launcher runs (UID \"u1\")"
        );
        assert_eq!(
            CommandError::NoSuchDomain("x_y".into()).to_string(),
            "Domain not found: no domain with matching name 'x_y'"
        );
        assert_eq!(
            CommandError::Internal("task 7 panicked".into()).to_string(),
            "internal error: task 7 panicked"
        );
    }
}
