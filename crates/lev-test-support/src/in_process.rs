//! A server in this process.

use std::path::Path;
use std::sync::Arc;

use lev_server::{AppState, Config, ServeError, Server, Settings};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A `lev_server::Server` on port 0, serving until stopped or dropped.
#[derive(Debug)]
pub struct InProcess {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The admin token of its data dir.
    pub admin: String,
    /// Its data dir (kept while any clone lives, so a restart can reuse it).
    pub dir: Arc<tempfile::TempDir>,
    /// The server's state, for looking inside.
    pub state: AppState,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), ServeError>>>,
}

impl InProcess {
    /// A fresh server in a new temporary data dir.
    ///
    /// # Errors
    /// When it cannot be bound.
    pub async fn start(settings: Settings) -> Result<Self, ServeError> {
        let dir = tempfile::tempdir().map_err(|e| ServeError::DataDir {
            path: std::env::temp_dir().display().to_string(),
            message: e.to_string(),
        })?;
        Self::start_in(Arc::new(dir), |config| config.settings = settings).await
    }

    /// A server on `dir` (a restart when it was used before), its config
    /// adjusted by `configure` after the test defaults (port 0).
    ///
    /// # Errors
    /// When it cannot be bound.
    pub async fn start_in(
        dir: Arc<tempfile::TempDir>,
        configure: impl FnOnce(&mut Config),
    ) -> Result<Self, ServeError> {
        let mut config = Config::new(dir.path().to_path_buf());
        config.listen = "127.0.0.1:0".into();
        configure(&mut config);
        let server = Server::bind(config).await?;
        let url = server.base_url();
        let admin = server
            .admin_token()
            .map(str::to_owned)
            .ok_or_else(|| ServeError::DataDir {
                path: dir.path().display().to_string(),
                message: "the server made no admin token".into(),
            })?;
        let state = server.state().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(server.serve(async move {
            let _ = stopped.await;
        }));
        Ok(Self {
            url,
            admin,
            dir,
            state,
            stop: Some(stop),
            handle: Some(handle),
        })
    }

    /// Its data dir.
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Begin a graceful shutdown; the handle resolves when it is done.
    pub fn begin_stop(&mut self) -> Option<JoinHandle<Result<(), ServeError>>> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.handle.take()
    }

    /// Shut down gracefully and wait; gives back the data dir for a restart.
    ///
    /// # Errors
    /// What the server's shutdown reported.
    pub async fn stop(mut self) -> Result<Arc<tempfile::TempDir>, ServeError> {
        if let Some(handle) = self.begin_stop() {
            handle.await.map_err(|e| ServeError::DataDir {
                path: self.dir.path().display().to_string(),
                message: format!("the server task failed: {e}"),
            })??;
        }
        Ok(Arc::clone(&self.dir))
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
