/// Generated client implementations.
pub mod cmd_client {
    #![allow(
        unused_variables,
        dead_code,
        missing_docs,
        clippy::wildcard_imports,
        clippy::let_unit_value,
    )]
    use tonic::codegen::*;
    use tonic::codegen::http::Uri;
    #[derive(Debug, Clone)]
    pub struct CmdClient<T> {
        inner: tonic::client::Grpc<T>,
    }
    impl CmdClient<tonic::transport::Channel> {
        /// Attempt to create a new client by connecting to a given endpoint.
        pub async fn connect<D>(dst: D) -> Result<Self, tonic::transport::Error>
        where
            D: TryInto<tonic::transport::Endpoint>,
            D::Error: Into<StdError>,
        {
            let conn = tonic::transport::Endpoint::new(dst)?.connect().await?;
            Ok(Self::new(conn))
        }
    }
    impl<T> CmdClient<T>
    where
        T: tonic::client::GrpcService<tonic::body::Body>,
        T::Error: Into<StdError>,
        T::ResponseBody: Body<Data = Bytes> + std::marker::Send + 'static,
        <T::ResponseBody as Body>::Error: Into<StdError> + std::marker::Send,
    {
        pub fn new(inner: T) -> Self {
            let inner = tonic::client::Grpc::new(inner);
            Self { inner }
        }
        pub fn with_origin(inner: T, origin: Uri) -> Self {
            let inner = tonic::client::Grpc::with_origin(inner, origin);
            Self { inner }
        }
        pub fn with_interceptor<F>(
            inner: T,
            interceptor: F,
        ) -> CmdClient<InterceptedService<T, F>>
        where
            F: tonic::service::Interceptor,
            T::ResponseBody: Default,
            T: tonic::codegen::Service<
                http::Request<tonic::body::Body>,
                Response = http::Response<
                    <T as tonic::client::GrpcService<tonic::body::Body>>::ResponseBody,
                >,
            >,
            <T as tonic::codegen::Service<
                http::Request<tonic::body::Body>,
            >>::Error: Into<StdError> + std::marker::Send + std::marker::Sync,
        {
            CmdClient::new(InterceptedService::new(inner, interceptor))
        }
        /// Compress requests with the given encoding.
        ///
        /// This requires the server to support it otherwise it might respond with an
        /// error.
        #[must_use]
        pub fn send_compressed(mut self, encoding: CompressionEncoding) -> Self {
            self.inner = self.inner.send_compressed(encoding);
            self
        }
        /// Enable decompressing responses.
        #[must_use]
        pub fn accept_compressed(mut self, encoding: CompressionEncoding) -> Self {
            self.inner = self.inner.accept_compressed(encoding);
            self
        }
        /// Limits the maximum size of a decoded message.
        ///
        /// Default: `4MB`
        #[must_use]
        pub fn max_decoding_message_size(mut self, limit: usize) -> Self {
            self.inner = self.inner.max_decoding_message_size(limit);
            self
        }
        /// Limits the maximum size of an encoded message.
        ///
        /// Default: `usize::MAX`
        #[must_use]
        pub fn max_encoding_message_size(mut self, limit: usize) -> Self {
            self.inner = self.inner.max_encoding_message_size(limit);
            self
        }
        pub async fn sync_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/SyncVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "SyncVirtualMachine"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn pause_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/PauseVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "PauseVirtualMachine"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn unpause_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/UnpauseVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "UnpauseVirtualMachine"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn freeze_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::FreezeRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/FreezeVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "FreezeVirtualMachine"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn unfreeze_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/UnfreezeVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new("kubevirt.cmd.v1.Cmd", "UnfreezeVirtualMachine"),
                );
            self.inner.unary(req, path, codec).await
        }
        pub async fn soft_reboot_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/SoftRebootVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new("kubevirt.cmd.v1.Cmd", "SoftRebootVirtualMachine"),
                );
            self.inner.unary(req, path, codec).await
        }
        pub async fn reset_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/ResetVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "ResetVirtualMachine"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn shutdown_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/ShutdownVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new("kubevirt.cmd.v1.Cmd", "ShutdownVirtualMachine"),
                );
            self.inner.unary(req, path, codec).await
        }
        pub async fn kill_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/KillVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "KillVirtualMachine"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn delete_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/DeleteVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "DeleteVirtualMachine"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn migrate_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::MigrationRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/MigrateVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "MigrateVirtualMachine"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn sync_migration_target(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/SyncMigrationTarget",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "SyncMigrationTarget"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn cancel_virtual_machine_migration(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/CancelVirtualMachineMigration",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new(
                        "kubevirt.cmd.v1.Cmd",
                        "CancelVirtualMachineMigration",
                    ),
                );
            self.inner.unary(req, path, codec).await
        }
        pub async fn signal_target_pod_cleanup(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/SignalTargetPodCleanup",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new("kubevirt.cmd.v1.Cmd", "SignalTargetPodCleanup"),
                );
            self.inner.unary(req, path, codec).await
        }
        pub async fn finalize_virtual_machine_migration(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/FinalizeVirtualMachineMigration",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new(
                        "kubevirt.cmd.v1.Cmd",
                        "FinalizeVirtualMachineMigration",
                    ),
                );
            self.inner.unary(req, path, codec).await
        }
        pub async fn hotplug_host_devices(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/HotplugHostDevices",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "HotplugHostDevices"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_domain(
            &mut self,
            request: impl tonic::IntoRequest<super::EmptyRequest>,
        ) -> std::result::Result<tonic::Response<super::DomainResponse>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetDomain",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetDomain"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_domain_stats(
            &mut self,
            request: impl tonic::IntoRequest<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::DomainStatsResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetDomainStats",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetDomainStats"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_guest_info(
            &mut self,
            request: impl tonic::IntoRequest<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::GuestInfoResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetGuestInfo",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetGuestInfo"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_users(
            &mut self,
            request: impl tonic::IntoRequest<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::GuestUserListResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetUsers",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetUsers"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_filesystems(
            &mut self,
            request: impl tonic::IntoRequest<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::GuestFilesystemsResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetFilesystems",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetFilesystems"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn ping(
            &mut self,
            request: impl tonic::IntoRequest<super::EmptyRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static("/kubevirt.cmd.v1.Cmd/Ping");
            let mut req = request.into_request();
            req.extensions_mut().insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "Ping"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn exec(
            &mut self,
            request: impl tonic::IntoRequest<super::ExecRequest>,
        ) -> std::result::Result<tonic::Response<super::ExecResponse>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static("/kubevirt.cmd.v1.Cmd/Exec");
            let mut req = request.into_request();
            req.extensions_mut().insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "Exec"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn guest_ping(
            &mut self,
            request: impl tonic::IntoRequest<super::GuestPingRequest>,
        ) -> std::result::Result<
            tonic::Response<super::GuestPingResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GuestPing",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GuestPing"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn virtual_machine_memory_dump(
            &mut self,
            request: impl tonic::IntoRequest<super::MemoryDumpRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/VirtualMachineMemoryDump",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new("kubevirt.cmd.v1.Cmd", "VirtualMachineMemoryDump"),
                );
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_qemu_version(
            &mut self,
            request: impl tonic::IntoRequest<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::QemuVersionResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetQemuVersion",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetQemuVersion"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn sync_virtual_machine_cp_us(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/SyncVirtualMachineCPUs",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new("kubevirt.cmd.v1.Cmd", "SyncVirtualMachineCPUs"),
                );
            self.inner.unary(req, path, codec).await
        }
        pub async fn sync_virtual_machine_memory(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/SyncVirtualMachineMemory",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new("kubevirt.cmd.v1.Cmd", "SyncVirtualMachineMemory"),
                );
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_sev_info(
            &mut self,
            request: impl tonic::IntoRequest<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::SevInfoResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetSEVInfo",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetSEVInfo"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_launch_measurement(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<
            tonic::Response<super::LaunchMeasurementResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetLaunchMeasurement",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetLaunchMeasurement"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn inject_launch_secret(
            &mut self,
            request: impl tonic::IntoRequest<super::InjectLaunchSecretRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/InjectLaunchSecret",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "InjectLaunchSecret"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_domain_dirty_rate_stats(
            &mut self,
            request: impl tonic::IntoRequest<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::DirtyRateStatsResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetDomainDirtyRateStats",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(
                    GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetDomainDirtyRateStats"),
                );
            self.inner.unary(req, path, codec).await
        }
        /// KubeVirt's main branch (after v1.6.6): compatible additions.
        pub async fn get_screenshot(
            &mut self,
            request: impl tonic::IntoRequest<super::VmiRequest>,
        ) -> std::result::Result<
            tonic::Response<super::ScreenshotResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetScreenshot",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetScreenshot"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn backup_virtual_machine(
            &mut self,
            request: impl tonic::IntoRequest<super::BackupRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/BackupVirtualMachine",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "BackupVirtualMachine"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn redefine_checkpoint(
            &mut self,
            request: impl tonic::IntoRequest<super::RedefineCheckpointRequest>,
        ) -> std::result::Result<
            tonic::Response<super::RedefineCheckpointResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/RedefineCheckpoint",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "RedefineCheckpoint"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_vm_stats(
            &mut self,
            request: impl tonic::IntoRequest<super::VmStatsRequest>,
        ) -> std::result::Result<
            tonic::Response<super::VmStatsResponse>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/kubevirt.cmd.v1.Cmd/GetVMStats",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("kubevirt.cmd.v1.Cmd", "GetVMStats"));
            self.inner.unary(req, path, codec).await
        }
    }
}
/// Generated server implementations.
pub mod cmd_server {
    #![allow(
        unused_variables,
        dead_code,
        missing_docs,
        clippy::wildcard_imports,
        clippy::let_unit_value,
    )]
    use tonic::codegen::*;
    /// Generated trait containing gRPC methods that should be implemented for use with CmdServer.
    #[async_trait]
    pub trait Cmd: std::marker::Send + std::marker::Sync + 'static {
        async fn sync_virtual_machine(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn pause_virtual_machine(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn unpause_virtual_machine(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn freeze_virtual_machine(
            &self,
            request: tonic::Request<super::FreezeRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn unfreeze_virtual_machine(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn soft_reboot_virtual_machine(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn reset_virtual_machine(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn shutdown_virtual_machine(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn kill_virtual_machine(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn delete_virtual_machine(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn migrate_virtual_machine(
            &self,
            request: tonic::Request<super::MigrationRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn sync_migration_target(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn cancel_virtual_machine_migration(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn signal_target_pod_cleanup(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn finalize_virtual_machine_migration(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn hotplug_host_devices(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn get_domain(
            &self,
            request: tonic::Request<super::EmptyRequest>,
        ) -> std::result::Result<tonic::Response<super::DomainResponse>, tonic::Status>;
        async fn get_domain_stats(
            &self,
            request: tonic::Request<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::DomainStatsResponse>,
            tonic::Status,
        >;
        async fn get_guest_info(
            &self,
            request: tonic::Request<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::GuestInfoResponse>,
            tonic::Status,
        >;
        async fn get_users(
            &self,
            request: tonic::Request<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::GuestUserListResponse>,
            tonic::Status,
        >;
        async fn get_filesystems(
            &self,
            request: tonic::Request<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::GuestFilesystemsResponse>,
            tonic::Status,
        >;
        async fn ping(
            &self,
            request: tonic::Request<super::EmptyRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn exec(
            &self,
            request: tonic::Request<super::ExecRequest>,
        ) -> std::result::Result<tonic::Response<super::ExecResponse>, tonic::Status>;
        async fn guest_ping(
            &self,
            request: tonic::Request<super::GuestPingRequest>,
        ) -> std::result::Result<
            tonic::Response<super::GuestPingResponse>,
            tonic::Status,
        >;
        async fn virtual_machine_memory_dump(
            &self,
            request: tonic::Request<super::MemoryDumpRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn get_qemu_version(
            &self,
            request: tonic::Request<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::QemuVersionResponse>,
            tonic::Status,
        >;
        async fn sync_virtual_machine_cp_us(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn sync_virtual_machine_memory(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn get_sev_info(
            &self,
            request: tonic::Request<super::EmptyRequest>,
        ) -> std::result::Result<tonic::Response<super::SevInfoResponse>, tonic::Status>;
        async fn get_launch_measurement(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<
            tonic::Response<super::LaunchMeasurementResponse>,
            tonic::Status,
        >;
        async fn inject_launch_secret(
            &self,
            request: tonic::Request<super::InjectLaunchSecretRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn get_domain_dirty_rate_stats(
            &self,
            request: tonic::Request<super::EmptyRequest>,
        ) -> std::result::Result<
            tonic::Response<super::DirtyRateStatsResponse>,
            tonic::Status,
        >;
        /// KubeVirt's main branch (after v1.6.6): compatible additions.
        async fn get_screenshot(
            &self,
            request: tonic::Request<super::VmiRequest>,
        ) -> std::result::Result<
            tonic::Response<super::ScreenshotResponse>,
            tonic::Status,
        >;
        async fn backup_virtual_machine(
            &self,
            request: tonic::Request<super::BackupRequest>,
        ) -> std::result::Result<tonic::Response<super::Response>, tonic::Status>;
        async fn redefine_checkpoint(
            &self,
            request: tonic::Request<super::RedefineCheckpointRequest>,
        ) -> std::result::Result<
            tonic::Response<super::RedefineCheckpointResponse>,
            tonic::Status,
        >;
        async fn get_vm_stats(
            &self,
            request: tonic::Request<super::VmStatsRequest>,
        ) -> std::result::Result<tonic::Response<super::VmStatsResponse>, tonic::Status>;
    }
    #[derive(Debug)]
    pub struct CmdServer<T> {
        inner: Arc<T>,
        accept_compression_encodings: EnabledCompressionEncodings,
        send_compression_encodings: EnabledCompressionEncodings,
        max_decoding_message_size: Option<usize>,
        max_encoding_message_size: Option<usize>,
    }
    impl<T> CmdServer<T> {
        pub fn new(inner: T) -> Self {
            Self::from_arc(Arc::new(inner))
        }
        pub fn from_arc(inner: Arc<T>) -> Self {
            Self {
                inner,
                accept_compression_encodings: Default::default(),
                send_compression_encodings: Default::default(),
                max_decoding_message_size: None,
                max_encoding_message_size: None,
            }
        }
        pub fn with_interceptor<F>(
            inner: T,
            interceptor: F,
        ) -> InterceptedService<Self, F>
        where
            F: tonic::service::Interceptor,
        {
            InterceptedService::new(Self::new(inner), interceptor)
        }
        /// Enable decompressing requests with the given encoding.
        #[must_use]
        pub fn accept_compressed(mut self, encoding: CompressionEncoding) -> Self {
            self.accept_compression_encodings.enable(encoding);
            self
        }
        /// Compress responses with the given encoding, if the client supports it.
        #[must_use]
        pub fn send_compressed(mut self, encoding: CompressionEncoding) -> Self {
            self.send_compression_encodings.enable(encoding);
            self
        }
        /// Limits the maximum size of a decoded message.
        ///
        /// Default: `4MB`
        #[must_use]
        pub fn max_decoding_message_size(mut self, limit: usize) -> Self {
            self.max_decoding_message_size = Some(limit);
            self
        }
        /// Limits the maximum size of an encoded message.
        ///
        /// Default: `usize::MAX`
        #[must_use]
        pub fn max_encoding_message_size(mut self, limit: usize) -> Self {
            self.max_encoding_message_size = Some(limit);
            self
        }
    }
    impl<T, B> tonic::codegen::Service<http::Request<B>> for CmdServer<T>
    where
        T: Cmd,
        B: Body + std::marker::Send + 'static,
        B::Error: Into<StdError> + std::marker::Send + 'static,
    {
        type Response = http::Response<tonic::body::Body>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<Self::Response, Self::Error>;
        fn poll_ready(
            &mut self,
            _cx: &mut Context<'_>,
        ) -> Poll<std::result::Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, req: http::Request<B>) -> Self::Future {
            match req.uri().path() {
                "/kubevirt.cmd.v1.Cmd/SyncVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct SyncVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for SyncVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::sync_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = SyncVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/PauseVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct PauseVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for PauseVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::pause_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = PauseVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/UnpauseVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct UnpauseVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for UnpauseVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::unpause_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = UnpauseVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/FreezeVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct FreezeVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::FreezeRequest>
                    for FreezeVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::FreezeRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::freeze_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = FreezeVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/UnfreezeVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct UnfreezeVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for UnfreezeVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::unfreeze_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = UnfreezeVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/SoftRebootVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct SoftRebootVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for SoftRebootVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::soft_reboot_virtual_machine(&inner, request)
                                    .await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = SoftRebootVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/ResetVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct ResetVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for ResetVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::reset_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = ResetVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/ShutdownVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct ShutdownVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for ShutdownVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::shutdown_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = ShutdownVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/KillVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct KillVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for KillVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::kill_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = KillVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/DeleteVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct DeleteVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for DeleteVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::delete_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = DeleteVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/MigrateVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct MigrateVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::MigrationRequest>
                    for MigrateVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::MigrationRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::migrate_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = MigrateVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/SyncMigrationTarget" => {
                    #[allow(non_camel_case_types)]
                    struct SyncMigrationTargetSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for SyncMigrationTargetSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::sync_migration_target(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = SyncMigrationTargetSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/CancelVirtualMachineMigration" => {
                    #[allow(non_camel_case_types)]
                    struct CancelVirtualMachineMigrationSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for CancelVirtualMachineMigrationSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::cancel_virtual_machine_migration(
                                        &inner,
                                        request,
                                    )
                                    .await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = CancelVirtualMachineMigrationSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/SignalTargetPodCleanup" => {
                    #[allow(non_camel_case_types)]
                    struct SignalTargetPodCleanupSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for SignalTargetPodCleanupSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::signal_target_pod_cleanup(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = SignalTargetPodCleanupSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/FinalizeVirtualMachineMigration" => {
                    #[allow(non_camel_case_types)]
                    struct FinalizeVirtualMachineMigrationSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for FinalizeVirtualMachineMigrationSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::finalize_virtual_machine_migration(
                                        &inner,
                                        request,
                                    )
                                    .await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = FinalizeVirtualMachineMigrationSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/HotplugHostDevices" => {
                    #[allow(non_camel_case_types)]
                    struct HotplugHostDevicesSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for HotplugHostDevicesSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::hotplug_host_devices(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = HotplugHostDevicesSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetDomain" => {
                    #[allow(non_camel_case_types)]
                    struct GetDomainSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::EmptyRequest>
                    for GetDomainSvc<T> {
                        type Response = super::DomainResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::EmptyRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_domain(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetDomainSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetDomainStats" => {
                    #[allow(non_camel_case_types)]
                    struct GetDomainStatsSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::EmptyRequest>
                    for GetDomainStatsSvc<T> {
                        type Response = super::DomainStatsResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::EmptyRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_domain_stats(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetDomainStatsSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetGuestInfo" => {
                    #[allow(non_camel_case_types)]
                    struct GetGuestInfoSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::EmptyRequest>
                    for GetGuestInfoSvc<T> {
                        type Response = super::GuestInfoResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::EmptyRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_guest_info(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetGuestInfoSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetUsers" => {
                    #[allow(non_camel_case_types)]
                    struct GetUsersSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::EmptyRequest>
                    for GetUsersSvc<T> {
                        type Response = super::GuestUserListResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::EmptyRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_users(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetUsersSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetFilesystems" => {
                    #[allow(non_camel_case_types)]
                    struct GetFilesystemsSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::EmptyRequest>
                    for GetFilesystemsSvc<T> {
                        type Response = super::GuestFilesystemsResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::EmptyRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_filesystems(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetFilesystemsSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/Ping" => {
                    #[allow(non_camel_case_types)]
                    struct PingSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::EmptyRequest>
                    for PingSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::EmptyRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::ping(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = PingSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/Exec" => {
                    #[allow(non_camel_case_types)]
                    struct ExecSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::ExecRequest>
                    for ExecSvc<T> {
                        type Response = super::ExecResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::ExecRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::exec(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = ExecSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GuestPing" => {
                    #[allow(non_camel_case_types)]
                    struct GuestPingSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::GuestPingRequest>
                    for GuestPingSvc<T> {
                        type Response = super::GuestPingResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::GuestPingRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::guest_ping(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GuestPingSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/VirtualMachineMemoryDump" => {
                    #[allow(non_camel_case_types)]
                    struct VirtualMachineMemoryDumpSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::MemoryDumpRequest>
                    for VirtualMachineMemoryDumpSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::MemoryDumpRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::virtual_machine_memory_dump(&inner, request)
                                    .await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = VirtualMachineMemoryDumpSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetQemuVersion" => {
                    #[allow(non_camel_case_types)]
                    struct GetQemuVersionSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::EmptyRequest>
                    for GetQemuVersionSvc<T> {
                        type Response = super::QemuVersionResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::EmptyRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_qemu_version(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetQemuVersionSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/SyncVirtualMachineCPUs" => {
                    #[allow(non_camel_case_types)]
                    struct SyncVirtualMachineCPUsSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for SyncVirtualMachineCPUsSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::sync_virtual_machine_cp_us(&inner, request)
                                    .await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = SyncVirtualMachineCPUsSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/SyncVirtualMachineMemory" => {
                    #[allow(non_camel_case_types)]
                    struct SyncVirtualMachineMemorySvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for SyncVirtualMachineMemorySvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::sync_virtual_machine_memory(&inner, request)
                                    .await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = SyncVirtualMachineMemorySvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetSEVInfo" => {
                    #[allow(non_camel_case_types)]
                    struct GetSEVInfoSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::EmptyRequest>
                    for GetSEVInfoSvc<T> {
                        type Response = super::SevInfoResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::EmptyRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_sev_info(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetSEVInfoSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetLaunchMeasurement" => {
                    #[allow(non_camel_case_types)]
                    struct GetLaunchMeasurementSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for GetLaunchMeasurementSvc<T> {
                        type Response = super::LaunchMeasurementResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_launch_measurement(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetLaunchMeasurementSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/InjectLaunchSecret" => {
                    #[allow(non_camel_case_types)]
                    struct InjectLaunchSecretSvc<T: Cmd>(pub Arc<T>);
                    impl<
                        T: Cmd,
                    > tonic::server::UnaryService<super::InjectLaunchSecretRequest>
                    for InjectLaunchSecretSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::InjectLaunchSecretRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::inject_launch_secret(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = InjectLaunchSecretSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetDomainDirtyRateStats" => {
                    #[allow(non_camel_case_types)]
                    struct GetDomainDirtyRateStatsSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::EmptyRequest>
                    for GetDomainDirtyRateStatsSvc<T> {
                        type Response = super::DirtyRateStatsResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::EmptyRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_domain_dirty_rate_stats(&inner, request)
                                    .await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetDomainDirtyRateStatsSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetScreenshot" => {
                    #[allow(non_camel_case_types)]
                    struct GetScreenshotSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmiRequest>
                    for GetScreenshotSvc<T> {
                        type Response = super::ScreenshotResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmiRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_screenshot(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetScreenshotSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/BackupVirtualMachine" => {
                    #[allow(non_camel_case_types)]
                    struct BackupVirtualMachineSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::BackupRequest>
                    for BackupVirtualMachineSvc<T> {
                        type Response = super::Response;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::BackupRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::backup_virtual_machine(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = BackupVirtualMachineSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/RedefineCheckpoint" => {
                    #[allow(non_camel_case_types)]
                    struct RedefineCheckpointSvc<T: Cmd>(pub Arc<T>);
                    impl<
                        T: Cmd,
                    > tonic::server::UnaryService<super::RedefineCheckpointRequest>
                    for RedefineCheckpointSvc<T> {
                        type Response = super::RedefineCheckpointResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::RedefineCheckpointRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::redefine_checkpoint(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = RedefineCheckpointSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/kubevirt.cmd.v1.Cmd/GetVMStats" => {
                    #[allow(non_camel_case_types)]
                    struct GetVMStatsSvc<T: Cmd>(pub Arc<T>);
                    impl<T: Cmd> tonic::server::UnaryService<super::VmStatsRequest>
                    for GetVMStatsSvc<T> {
                        type Response = super::VmStatsResponse;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<super::VmStatsRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Cmd>::get_vm_stats(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetVMStatsSvc(inner);
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                _ => {
                    Box::pin(async move {
                        let mut response = http::Response::new(
                            tonic::body::Body::default(),
                        );
                        let headers = response.headers_mut();
                        headers
                            .insert(
                                tonic::Status::GRPC_STATUS,
                                (tonic::Code::Unimplemented as i32).into(),
                            );
                        headers
                            .insert(
                                http::header::CONTENT_TYPE,
                                tonic::metadata::GRPC_CONTENT_TYPE,
                            );
                        Ok(response)
                    })
                }
            }
        }
    }
    impl<T> Clone for CmdServer<T> {
        fn clone(&self) -> Self {
            let inner = self.inner.clone();
            Self {
                inner,
                accept_compression_encodings: self.accept_compression_encodings,
                send_compression_encodings: self.send_compression_encodings,
                max_decoding_message_size: self.max_decoding_message_size,
                max_encoding_message_size: self.max_encoding_message_size,
            }
        }
    }
    /// Generated gRPC service name
    pub const SERVICE_NAME: &str = "kubevirt.cmd.v1.Cmd";
    impl<T> tonic::server::NamedService for CmdServer<T> {
        const NAME: &'static str = SERVICE_NAME;
    }
}
