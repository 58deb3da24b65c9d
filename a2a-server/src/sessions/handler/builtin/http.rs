//! The `http` session handler (SES-9, HDL-2, HDL-3): POSTs the delivery as JSON to a URL and expects `{"reply": "..."}` (or
//! `{"error": "..."}`) with a `2xx`.
//!
//! The request carries `A2A-Run-ID`, `A2A-Session`, `A2A-Step`, the provenance hop in `A2A-Hop` (POL-4: a send
//! the service makes carries the next hop) and, when the requester is waiting, `A2A-Wait-Chain` (POL-5: a send the
//! service makes carries it on), plus `Authorization: Bearer <token>` when a token variable is configured
//! and the configured headers. Redirects are not followed. Limits: `timeout_ms` (then `TimedOut`) and
//! `max_response_bytes`; a non-`2xx` answer fails the delivery with the status and the start of the body.

use std::time::Duration;

use a2a_core::sessions::{Delivery, HOP_HEADER, WAIT_CHAIN_HEADER};

use super::{EXCERPT_CHARS, head, read_body_capped, reply_from_json, step_name};
use crate::sessions::config::HttpConfig;
use crate::sessions::{HandlerFailure, SessionHandler};

/// POSTs each delivery to a URL (see the module documentation).
#[derive(Debug, Clone)]
pub struct HttpHandler {
    client: reqwest::Client,
    config: HttpConfig,
    bearer: Option<String>,
}

impl HttpHandler {
    /// A handler for `config` (checked when the configuration was read), with the bearer token read from the
    /// variable it names, if any.
    pub fn new(config: HttpConfig, bearer: Option<String>) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_millis(config.timeout_ms))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpHandler { client, config, bearer })
    }
}

#[async_trait::async_trait]
impl SessionHandler for HttpHandler {
    async fn handle(&self, delivery: Delivery) -> Result<String, HandlerFailure> {
        let url = &self.config.url;
        let who = format!("POST {url}");
        let mut req = self
            .client
            .post(url)
            .header("A2A-Run-ID", &delivery.run_id)
            .header("A2A-Session", &delivery.session)
            .header("A2A-Step", step_name(delivery.step))
            .header(HOP_HEADER, delivery.provenance.hop.to_string())
            .json(&delivery);
        if let Some(chain) = crate::sessions::current_wait_chain() {
            req = req.header(WAIT_CHAIN_HEADER, chain);
        }
        if let Some(t) = &self.bearer {
            req = req.bearer_auth(t);
        }
        for (k, v) in &self.config.headers {
            req = req.header(k, v);
        }
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                HandlerFailure::TimedOut(format!(
                    "{who} did not answer within {} ms (handler timeout_ms)",
                    self.config.timeout_ms
                ))
            } else {
                HandlerFailure::Failed(format!("{who}: {}", a2a_core::error::with_causes(&e)))
            }
        };
        let resp = req.send().await.map_err(failed)?;
        let status = resp.status();
        let body = read_body_capped(resp, self.config.max_response_bytes, self.config.timeout_ms, &who).await?;
        if !status.is_success() {
            return Err(HandlerFailure::Failed(format!("{who} answered {status}: {}", head(&body, EXCERPT_CHARS))));
        }
        reply_from_json(&body, &who)
    }
}
