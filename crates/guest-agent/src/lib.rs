//! What the QEMU guest agent answers, made safe to hand on: [`parse`]
//! decodes each reply (qemu-ga's QAPI schema) into KubeVirt's guest-agent
//! shapes ([`wire::guest_info`], [`wire::api_domain::InterfaceStatus`]) and
//! [`bounds`] holds the limit of every string, list and reply, enforced
//! while decoding.
//!
//! Pure and free of libvirt: `virtwrap::agent` (the poller, the store, the
//! RPCs) feeds it the text of libvirt's `virDomainQemuAgentCommand`, and
//! the fuzz targets feed it arbitrary text without building libvirt's
//! bindings or the gRPC stack.

pub mod bounds;
pub mod parse;

pub use parse::ParseError;
