//! The model routes' stack (`/v1/chat/completions`, `/v1/embeddings`,
//! `/v1/responses`, `/v1/messages`), composed here and nowhere else. The
//! request as each layer sees it is in [`super::model_call`].

use tower::ServiceBuilder;

use super::Next;
use super::admission::AdmissionLayer;
use super::budget::BudgetLayer;
use super::cache::CacheLayer;
use super::context::ContextLayer;
use super::dedup::DedupLayer;
use super::fallback::FallbackLayer;
use super::model_call::Incoming;
use super::observe::ObserveLayer;
use super::provider::ProviderLayer;
use super::upstream::attempts;
use super::usage::UsageLayer;

/// The stack of the model routes: the request path, top to bottom (it
/// holds nothing: see [`super::step`]).
pub(crate) fn stack() -> impl Next<Incoming, axum::response::Response> {
    ServiceBuilder::new()
        .layer(ObserveLayer)
        .layer(ContextLayer::new())
        .layer(CacheLayer::new())
        .layer(DedupLayer::new())
        .layer(AdmissionLayer::new())
        .layer(BudgetLayer::new())
        .layer(FallbackLayer::new())
        .layer(ProviderLayer::new())
        .layer(UsageLayer::new())
        .service(attempts())
}
