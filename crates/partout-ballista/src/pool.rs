//! [`SharedClientPool`]: one connection per executor for the shuffle readers of the stages
//! partout's engine runs.

use ballista_core::client::BallistaClient;
use ballista_core::client_pool::{BallistaClientPool, PooledClient};
use ballista_core::extension::BallistaConfigGrpcEndpoint;
use ballista_core::utils::GrpcClientConfig;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Key = (String, u16, GrpcClientConfig);

/// Clients of other executors' Flight services, one per executor and client configuration,
/// shared by every fetch: a client is a gRPC channel over one HTTP/2 connection, which
/// carries concurrent requests, so clones of it serve every reader. A fetch that fails
/// discards its client and the next one connects anew.
///
/// (An executor whose engine is replaced gets no pool from Ballista: without one, every
/// remote fetch would open a connection of its own.)
#[derive(Default)]
pub struct SharedClientPool {
    clients: Arc<Mutex<HashMap<Key, BallistaClient>>>,
}

impl std::fmt::Debug for SharedClientPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedClientPool")
            .field("clients", &self.len())
            .finish()
    }
}

impl SharedClientPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// Executors the pool holds a client of.
    pub fn len(&self) -> usize {
        self.clients.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether the pool holds no client.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait::async_trait]
impl BallistaClientPool for SharedClientPool {
    async fn acquire(
        &self,
        host: &str,
        port: u16,
        config: &GrpcClientConfig,
        customize_endpoint: Option<Arc<BallistaConfigGrpcEndpoint>>,
    ) -> ballista_core::error::Result<PooledClient> {
        let key = (host.to_string(), port, config.clone());
        let held = self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let client = match held {
            Some(client) => client,
            None => {
                let client = BallistaClient::try_new(
                    host,
                    port,
                    config.max_message_size,
                    config.use_tls,
                    customize_endpoint,
                    config.io_retries_times,
                    config.io_retry_wait_time_ms,
                    config.initial_connection_window_size,
                    config.initial_stream_window_size,
                )
                .await?;
                self.clients
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key.clone(), client.clone());
                client
            }
        };
        // Given back after use (the closure called), the pool keeps its clone; discarded after
        // a failure (the closure dropped uncalled), the pool lets its clone go, and the next
        // fetch reconnects.
        let mut guard = Discarded {
            key: Some(key),
            clients: self.clients.clone(),
        };
        let forget = Box::new(move |_client: BallistaClient| guard.disarm());
        Ok(PooledClient::new(client, forget))
    }

    async fn evict_idle(&self) {
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// Removes its key from the pool when dropped still holding it.
struct Discarded {
    key: Option<Key>,
    clients: Arc<Mutex<HashMap<Key, BallistaClient>>>,
}

impl Discarded {
    /// The client was given back: the pool keeps it.
    fn disarm(&mut self) {
        self.key = None;
    }
}

impl Drop for Discarded {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.clients
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        }
    }
}
