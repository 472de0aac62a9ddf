//! The DHCP servers phase 2 plans, on threads of their own.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::dhcpv4::ServerOptions;
use crate::dhcpv6::ServerV6;

use super::Phase2Error;

/// [`Phase2Error::Server`] for `what`.
fn server_error(what: String) -> impl FnOnce(std::io::Error) -> Phase2Error {
    move |source| Phase2Error::Server { what, source }
}

/// Stack of a DHCP server thread: `poll`, one 1.5 KiB datagram buffer,
/// the reply built in the heap and log lines (16 KiB of it resident in a
/// running launcher, thread data included). 256 KiB bound it well above
/// that (std's default is 2 MiB).
const SERVER_STACK: usize = 256 * 1024;

/// Running DHCP servers; [`DhcpServers::stop`] ends them.
#[derive(Debug)]
pub struct DhcpServers {
    stop: Arc<crate::server::Stop>,
    threads: Vec<JoinHandle<()>>,
}

impl DhcpServers {
    /// Binds every server (port 67 on its bridge) and starts one thread
    /// each. A server error after start is logged.
    ///
    /// # Errors
    /// [`Phase2Error::Server`]: the bind error, naming the bridge.
    pub fn start(
        servers: Vec<(String, ServerOptions)>,
        servers6: Vec<(String, ServerV6)>,
    ) -> Result<Self, Phase2Error> {
        let stop = Arc::new(
            crate::server::Stop::new().map_err(server_error("DHCP server stop pipe".into()))?,
        );
        let mut threads = Vec::new();
        for (bridge, opts) in servers6 {
            let sock = crate::server::bind_v6(&bridge, crate::server::SERVER_PORT_V6)
                .map_err(server_error(format!("DHCPv6 server on {bridge}")))?;
            let stop = Arc::clone(&stop);
            let t = std::thread::Builder::new()
                .name(format!("dhcp6-{bridge}"))
                .stack_size(SERVER_STACK)
                .spawn(move || {
                    tracing::info!(%bridge, "DHCPv6 server started");
                    match crate::server::serve_v6(
                        &sock,
                        &opts,
                        crate::server::CLIENT_PORT_V6,
                        &stop,
                    ) {
                        Ok(stats) => tracing::info!(%bridge, ?stats, "DHCPv6 server stopped"),
                        Err(e) => tracing::error!(%bridge, "DHCPv6 server failed: {e}"),
                    }
                })
                .map_err(server_error("DHCPv6 server thread".into()))?;
            threads.push(t);
        }
        for (bridge, opts) in servers {
            let sock = crate::server::bind(&bridge, crate::server::SERVER_PORT)
                .map_err(server_error(format!("DHCP server on {bridge}")))?;
            let stop = Arc::clone(&stop);
            let t = std::thread::Builder::new()
                .name(format!("dhcp-{bridge}"))
                .stack_size(SERVER_STACK)
                .spawn(move || {
                    tracing::info!(%bridge, "DHCPv4 server started");
                    match crate::server::serve(&sock, &opts, crate::server::CLIENT_PORT, &stop) {
                        Ok(stats) => tracing::info!(%bridge, ?stats, "DHCPv4 server stopped"),
                        Err(e) => tracing::error!(%bridge, "DHCPv4 server failed: {e}"),
                    }
                })
                .map_err(server_error("DHCP server thread".into()))?;
            threads.push(t);
        }
        Ok(DhcpServers { stop, threads })
    }

    /// Stops the servers and waits for them.
    pub fn stop(self) {
        self.stop.stop();
        for t in self.threads {
            let _ = t.join();
        }
    }
}
