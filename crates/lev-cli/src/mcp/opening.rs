//! A transport that keeps the connection up through the messages a client
//! may send before any lifecycle starts.
//!
//! rmcp ends the whole service when the first message that is not a request
//! arrives before `initialize` (or before the first 2026-07-28 request with
//! its `_meta`). Clients do send such messages: a dual-era client whose
//! `server/discover` probe timed out sends `notifications/cancelled` for it
//! before it falls back to `initialize`. SPEC section 10 says an unknown
//! message never closes the connection, so until a lifecycle starts this
//! wrapper drops notifications and responses (they have no one to answer)
//! and passes every request on; rmcp answers each request, with an error
//! when it cannot serve it.

use std::borrow::Cow;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, GetMeta as _, JsonRpcMessage, ProtocolVersion};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// `inner`, dropping what cannot start a lifecycle until one has started.
#[derive(Debug)]
pub struct Opening<T> {
    inner: T,
    started: bool,
    supported: Cow<'static, [ProtocolVersion]>,
}

impl<T> Opening<T> {
    /// Wrap `inner`; `supported` are the versions the server serves, as rmcp
    /// checks a 2026-07-28 opening request against them.
    pub fn new(inner: T, supported: Cow<'static, [ProtocolVersion]>) -> Self {
        Self {
            inner,
            started: false,
            supported,
        }
    }

    /// Whether `message` opens a lifecycle in rmcp: `initialize`, or a request
    /// other than `ping` and `server/discover` whose `_meta` names a supported
    /// version and carries the client's capabilities.
    pub(crate) fn opens(&self, message: &RxJsonRpcMessage<RoleServer>) -> bool {
        let JsonRpcMessage::Request(request) = message else {
            return false;
        };
        match &request.request {
            ClientRequest::InitializeRequest(_) => true,
            ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
            other => {
                let meta = other.get_meta();
                meta.missing_required_keys(&ProtocolVersion::V_2026_07_28)
                    .is_empty()
                    && meta
                        .protocol_version()
                        .is_some_and(|v| self.supported.contains(&v))
            }
        }
    }
}

impl<T> Transport<RoleServer> for Opening<T>
where
    T: Transport<RoleServer>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let message = self.inner.receive().await?;
            if self.started {
                return Some(message);
            }
            if self.opens(&message) {
                self.started = true;
                return Some(message);
            }
            if matches!(message, JsonRpcMessage::Request(_)) {
                return Some(message);
            }
            // A notification or a response with no lifecycle to belong to.
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
