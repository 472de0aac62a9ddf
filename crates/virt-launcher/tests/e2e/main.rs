//! End-to-end tests: the real launcher, real libvirt, real QEMU (TCG), the
//! real test guest. One test binary; tests run in parallel, each with its
//! own launcher, state directory and libvirt daemon.

mod bad_input;
mod harness;
mod lifecycle;
mod manager;
