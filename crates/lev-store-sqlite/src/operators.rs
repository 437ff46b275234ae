//! The operators' relay: in this process's memory. One process opens a
//! SQLite data dir (`lev.lock`), so every waiter and every operator
//! connection is here, and nothing of it outlives the HTTP requests that
//! wait on it.

use async_trait::async_trait;
use lev_store::{
    OperatorPresence, OperatorReply, OperatorRequest, OperatorSignal, OperatorStore,
    ResolveOutcome, Result, WithdrawOutcome,
};
use tokio::sync::broadcast;

use crate::SqliteStore;

#[async_trait]
impl OperatorStore for SqliteStore {
    fn operator_signals(&self) -> broadcast::Receiver<OperatorSignal> {
        self.operators.operator_signals()
    }

    async fn post_operator_request(&self, request: OperatorRequest) -> Result<()> {
        self.operators.post_operator_request(request).await
    }

    async fn operator_request(&self, req_id: &str) -> Result<Option<OperatorRequest>> {
        self.operators.operator_request(req_id).await
    }

    async fn pending_operator_requests(&self, session_id: &str) -> Result<Vec<OperatorRequest>> {
        self.operators.pending_operator_requests(session_id).await
    }

    async fn resolve_operator_request(
        &self,
        session_id: &str,
        req_id: &str,
        reply_type: &str,
        reply: OperatorReply,
    ) -> Result<ResolveOutcome> {
        self.operators
            .resolve_operator_request(session_id, req_id, reply_type, reply)
            .await
    }

    async fn operator_reply(&self, req_id: &str) -> Result<Option<OperatorReply>> {
        self.operators.operator_reply(req_id).await
    }

    async fn withdraw_operator_request(&self, req_id: &str) -> Result<WithdrawOutcome> {
        self.operators.withdraw_operator_request(req_id).await
    }

    async fn connect_operator(
        &self,
        session_id: &str,
        conn: &str,
        operator: &str,
    ) -> Result<Option<OperatorPresence>> {
        self.operators
            .connect_operator(session_id, conn, operator)
            .await
    }

    async fn disconnect_operator(&self, session_id: &str, conn: &str) -> Result<bool> {
        self.operators.disconnect_operator(session_id, conn).await
    }

    async fn operator_presence(&self, session_id: &str) -> Result<Option<OperatorPresence>> {
        self.operators.operator_presence(session_id).await
    }

    async fn notify_operator(&self, session_id: &str, frame: String) -> Result<()> {
        self.operators.notify_operator(session_id, frame).await
    }
}
