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
use super::pool::PoolLayer;
use super::provider::ProviderLayer;
use super::usage::UsageLayer;
use super::wire::attempts;

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
        .layer(PoolLayer::new())
        .layer(ProviderLayer::new())
        .layer(UsageLayer::new())
        .service(attempts())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderMap;
    use sluice_usage::Endpoint;

    use super::*;
    use crate::layers::auth::Tenant;
    use crate::layers::call;
    use crate::layers::testing::state;

    /// The stack is one future, each layer's inline in the one above: its
    /// size is the sum of what each layer keeps across its awaits, fixed
    /// by the types (the retry and fallback loops reuse their slot). A
    /// bound well above today's size catches a layer that starts to hold
    /// something large across an await (a body, a header map by value).
    #[tokio::test]
    async fn the_stack_is_one_future_of_bounded_size() {
        let state = state();
        let headers = HeaderMap::new();
        let tenant = Tenant::from_headers(&state, &headers).expect("an open gateway");
        let incoming = Incoming {
            state: state.clone(),
            endpoint: Endpoint::Chat,
            tenant,
            headers,
            body: bytes::Bytes::from_static(b"{}"),
        };
        let future = call(stack(), incoming);
        let size = std::mem::size_of_val(&future);
        eprintln!("the model routes' stack future: {size} bytes");
        assert!(size < 24 * 1024, "the stack's future takes {size} bytes");
    }
}
