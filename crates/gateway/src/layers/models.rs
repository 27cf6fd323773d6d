//! The model routes' stack (`/v1/chat/completions`, `/v1/embeddings`,
//! `/v1/responses`, `/v1/messages`), composed here and nowhere else. The
//! request as each layer sees it is in [`super::model_call`].

use tower::ServiceBuilder;

use super::Next;
use super::admission::AdmissionLayer;
use super::budget::BudgetLayer;
use super::bulkhead::BulkheadLayer;
use super::cache::CacheLayer;
use super::context::ContextLayer;
use super::dedup::DedupLayer;
use super::fallback::FallbackLayer;
use super::limits::LimitsLayer;
use super::model_call::Incoming;
use super::observe::ObserveLayer;
use super::provider::ProviderLayer;
use super::retry::RetryLayer;
use super::upstream::Wire;
use super::usage::UsageLayer;
use crate::state::AppState;

/// The stack of the model routes: the request path, top to bottom.
pub(crate) fn stack(state: &AppState) -> impl Next<Incoming, axum::response::Response> {
    ServiceBuilder::new()
        .layer(ObserveLayer::new(state))
        .layer(ContextLayer::new(state))
        .layer(CacheLayer::new(state))
        .layer(DedupLayer::new(state))
        .layer(AdmissionLayer::new(state))
        .layer(BudgetLayer::new(state))
        .layer(FallbackLayer::new(state))
        .layer(ProviderLayer::new(state))
        .layer(UsageLayer::new(state))
        .layer(RetryLayer::new(state))
        .layer(LimitsLayer::new(state))
        .layer(BulkheadLayer::new(state))
        .service(Wire::new(state))
}
