//! The context of a run: the options, the agent as discovered (DISCOVER and the capabilities document), the plan of
//! which capability exercises what, the caller identities, and the transcript of every exchange.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_core::integrity::Coverage;
use a2a_core::wire::AgentLimits;
use serde_json::Value;

use crate::didhost::DidHost;
use crate::http::{Req, Resp, Signing};
use crate::identity::Identity;
use crate::payload;
use crate::report::Level;

/// The sender DID of unsigned requests.
pub const SENDER_A: &str = "did:web:conformance.example";
/// A second sender DID, for the checks that one sender cannot use another's negotiations and executions.
pub const SENDER_B: &str = "did:web:conformance.example:caller_b";
/// The browser origin of the CORS checks unless `--origin` names another.
pub const DEFAULT_ORIGIN: &str = "https://app.conformance.example";

/// What a run checks and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The agent's URL (`https://agent.example.com` or `.../a2a`).
    pub target: String,
    /// The highest level to check.
    pub level: Level,
    /// Comma-separated globs over check ids and requirement ids.
    pub only: Option<String>,
    /// The caller identity to sign as (`--identity`, `--did`).
    pub identity: Option<Identity>,
    /// Serve the suite's own DID documents on this loopback address (`--serve-did`).
    pub serve_did: Option<String>,
    /// The API key for `api_key` capabilities (`--api-key`).
    pub api_key: Option<String>,
    /// The browser origin of the CORS checks.
    pub origin: String,
    /// Time limit of one request.
    pub timeout: Duration,
    /// How long to wait for an execution to become terminal.
    pub result_timeout: Duration,
    /// The target is a gateway (`--gateway`, §15): the gateway checks run, the agent-only ones are skipped.
    pub gateway: bool,
    /// The capability the generic checks drive (`--capability`); by default the first the suite can drive, by auth
    /// and region (none before api_key before did_auth).
    pub capability: Option<String>,
    /// The capability the deadline and late-result checks (ST-2, ST-3) drive (`--slow-capability`); by default the
    /// one with the largest declared `estimated_latency_ms`, or one whose input names a duration.
    pub slow_capability: Option<String>,
    /// The payload to send to the slow capability (`--slow-payload`); by default one made from its `input_schema`
    /// (a duration member set to about two seconds).
    pub slow_payload: Option<Value>,
}

impl Options {
    /// Options with the defaults for `target`.
    pub fn new(target: impl Into<String>) -> Options {
        Options {
            target: target.into(),
            level: Level::May,
            only: None,
            identity: None,
            serve_did: None,
            api_key: None,
            origin: DEFAULT_ORIGIN.to_owned(),
            timeout: Duration::from_secs(30),
            result_timeout: Duration::from_secs(60),
            gateway: false,
            capability: None,
            slow_capability: None,
            slow_payload: None,
        }
    }
}

/// The agent as DISCOVER and `GET /a2a/capabilities` described it.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// The DISCOVER response.
    pub discover: Option<Resp>,
    /// The capabilities response.
    pub capabilities: Option<Resp>,
    /// The agent's DID: `A2A-Sender-ID` of DISCOVER, else `agent.id` of the document.
    pub agent_did: Option<String>,
    /// The capability names advertised (`A2A-Capabilities`, else the document).
    pub names: Vec<String>,
    /// The capabilities document as JSON.
    pub doc: Option<Value>,
    /// The declarations, read leniently (unknown members ignored, TR-9).
    pub decls: Vec<CapabilityDeclaration>,
    /// The optional features listed.
    pub features: Vec<String>,
    /// The announced limits.
    pub limits: Option<AgentLimits>,
}

impl Discovery {
    /// Whether the agent lists a feature (`long_poll`, `cancel`, `idempotency`).
    pub fn has_feature(&self, f: &str) -> bool {
        self.features.iter().any(|x| x == f)
    }

    /// The declaration of a capability.
    pub fn decl(&self, name: &str) -> Option<&CapabilityDeclaration> {
        self.decls.iter().find(|d| d.name == name)
    }
}

/// How the suite authenticates to a capability.
#[derive(Debug, Clone)]
pub enum CallerAuth {
    /// Nothing to send.
    None,
    /// `A2A-Api-Key`.
    ApiKey(String),
    /// `A2A-Signature` by this identity.
    Signed(Arc<Identity>),
}

/// A capability the suite can drive end to end: how to call it and a payload its schema accepts.
#[derive(Debug, Clone)]
pub struct CapPlan {
    /// Its declaration.
    pub decl: CapabilityDeclaration,
    /// A payload valid under its `input_schema`.
    pub payload: Value,
    /// The `A2A-Region` to send (one of its regions), when it is restricted.
    pub region: Option<String>,
    /// How to authenticate.
    pub auth: CallerAuth,
    /// Why the suite drives this capability (named by an option, or how it was chosen), for the report.
    pub why: String,
}

impl CapPlan {
    /// The sender DID to use with it.
    pub fn sender(&self) -> &str {
        match &self.auth {
            CallerAuth::Signed(id) => &id.did,
            _ => SENDER_A,
        }
    }
}

/// Which capability exercises what.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The capability the generic checks drive (NEGOTIATE, EXECUTE, CONFIRM, RESULT, ...), or why there is none.
    pub main: Result<CapPlan, String>,
    /// A `did_auth` capability with a caller identity to sign with, or why there is none.
    pub did_auth: Result<CapPlan, String>,
    /// A `did_auth` capability (for the unsigned-request checks, which need no identity).
    pub did_auth_decl: Option<CapabilityDeclaration>,
    /// An `api_key` capability.
    pub api_key_decl: Option<CapabilityDeclaration>,
    /// An `oauth2` capability.
    pub oauth2_decl: Option<CapabilityDeclaration>,
    /// A region-restricted capability the suite can authenticate to, or why there is none.
    pub restricted: Result<CapPlan, String>,
    /// A capability whose handler takes long enough to outlive a 1 ms deadline or a CANCEL (ST-2, ST-3), or why
    /// there is none. Whether it really is slow is measured by the checks that drive it.
    pub slow: Result<CapPlan, String>,
}

impl Plan {
    /// Chooses capabilities from the declarations.
    pub fn choose(disc: &Discovery, identity: Option<&Arc<Identity>>, opts: &Options) -> Plan {
        let api_key = opts.api_key.as_deref();
        let advertised: Vec<&CapabilityDeclaration> =
            disc.decls.iter().filter(|d| disc.names.is_empty() || disc.names.contains(&d.name)).collect();
        let auth_for = |d: &CapabilityDeclaration| -> Option<CallerAuth> {
            match d.auth_requirement {
                AuthRequirement::None => Some(CallerAuth::None),
                AuthRequirement::ApiKey => api_key.map(|k| CallerAuth::ApiKey(k.to_owned())),
                AuthRequirement::DidAuth => identity.map(|i| CallerAuth::Signed(i.clone())),
                AuthRequirement::Oauth2 => None,
            }
        };
        let plan_of = |d: &CapabilityDeclaration| -> Option<CapPlan> {
            let auth = auth_for(d)?;
            let payload = payload::valid(&d.input_schema)?;
            Some(CapPlan {
                decl: d.clone(),
                payload,
                region: d.region_restriction.first().cloned(),
                auth,
                why: String::new(),
            })
        };
        let with_why = |mut p: CapPlan, why: String| {
            p.why = why;
            p
        };
        let rank = |d: &CapabilityDeclaration| -> u8 {
            let auth = match d.auth_requirement {
                AuthRequirement::None => 0,
                AuthRequirement::ApiKey => 2,
                AuthRequirement::DidAuth => 4,
                AuthRequirement::Oauth2 => 8,
            };
            auth + u8::from(!d.region_restriction.is_empty())
        };
        let mut by_rank = advertised.clone();
        by_rank.sort_by_key(|d| rank(d));
        let main = match &opts.capability {
            Some(name) => {
                named_plan(&advertised, name, &plan_of).map(|p| with_why(p, "named by --capability".to_owned()))
            }
            None => by_rank.iter().find_map(|d| plan_of(d)).map(|p| {
                let why = format!(
                    "the first advertised capability the suite can drive (auth {}, {}): none before api_key before \
                     did_auth, unrestricted before region-restricted; --capability chooses another",
                    auth_name(&p.decl.auth_requirement),
                    if p.region.is_some() { "region-restricted" } else { "no region restriction" }
                );
                with_why(p, why)
            }),
        }
        .ok_or_else(|| {
            if let Some(name) = &opts.capability {
                return format!(
                    "--capability {name}: the agent does not advertise it, or the run lacks its credentials, or the \
                     suite cannot make a payload for its input_schema"
                );
            }
            if advertised.is_empty() {
                "the agent advertises no capability".to_owned()
            } else {
                format!(
                    "no advertised capability can be driven: each needs credentials the run lacks (--api-key, \
                     --identity/--serve-did) or has an input_schema the suite cannot make a payload for ({})",
                    advertised.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
                )
            }
        });
        let did_auth_decl =
            advertised.iter().find(|d| d.auth_requirement == AuthRequirement::DidAuth).map(|d| (*d).clone());
        let did_auth = match (&did_auth_decl, identity) {
            (None, _) => Err("the agent advertises no did_auth capability".to_owned()),
            (Some(_), None) => {
                Err("the agent has a did_auth capability but the run has no caller identity: give --identity KEYFILE \
                 --did DID, or --serve-did"
                    .to_owned())
            }
            (Some(_), Some(_)) => advertised
                .iter()
                .filter(|d| d.auth_requirement == AuthRequirement::DidAuth)
                .find_map(|d| plan_of(d))
                .map(|p| {
                    with_why(p, "the first advertised did_auth capability the suite can make a payload for".into())
                })
                .ok_or_else(|| {
                    "no did_auth capability has an input_schema the suite can make a payload for".to_owned()
                }),
        };
        let restricted = if advertised.iter().any(|d| !d.region_restriction.is_empty()) {
            advertised
                .iter()
                .filter(|d| !d.region_restriction.is_empty())
                .find_map(|d| plan_of(d))
                .map(|p| with_why(p, "the first advertised region-restricted capability the suite can authenticate to".into()))
                .ok_or_else(|| "no region-restricted capability can be driven with the credentials of this run (an api_key one needs --api-key)".to_owned())
        } else {
            Err("the agent advertises no region-restricted capability".to_owned())
        };
        let find = |a: AuthRequirement| advertised.iter().find(|d| d.auth_requirement == a).map(|d| (*d).clone());
        Plan {
            main,
            did_auth,
            did_auth_decl,
            api_key_decl: find(AuthRequirement::ApiKey),
            oauth2_decl: find(AuthRequirement::Oauth2),
            restricted,
            slow: slow_plan(&advertised, opts, &plan_of),
        }
    }
}

/// The name of an `auth_requirement`, as the declaration spells it.
fn auth_name(a: &AuthRequirement) -> &'static str {
    match a {
        AuthRequirement::None => "none",
        AuthRequirement::ApiKey => "api_key",
        AuthRequirement::DidAuth => "did_auth",
        AuthRequirement::Oauth2 => "oauth2",
    }
}

/// The plan of the capability an option names.
fn named_plan(
    advertised: &[&CapabilityDeclaration],
    name: &str,
    plan_of: &dyn Fn(&CapabilityDeclaration) -> Option<CapPlan>,
) -> Option<CapPlan> {
    advertised.iter().find(|d| d.name == name).and_then(|d| plan_of(d))
}

/// How long the suite wants a slow capability's handler to take: long enough that a 1 ms deadline, or a CANCEL sent
/// at once, falls well inside it.
pub const SLOW_TARGET_MS: u64 = 2_000;

/// Members of an input schema that name a duration, with the unit of their value in milliseconds.
fn duration_member(name: &str) -> Option<u64> {
    let n = name.to_ascii_lowercase();
    if n.ends_with("_ms") || n.ends_with("millis") || n.ends_with("milliseconds") {
        Some(1)
    } else if ["seconds", "secs", "sec", "duration_s", "delay_s", "sleep_s", "wait_s", "sleep", "delay", "duration"]
        .contains(&n.as_str())
    {
        Some(1000)
    } else {
        None
    }
}

/// A payload for a slow capability: the minimal valid one with each duration member (a number property named like
/// `seconds` or `delay_ms`) set to [`SLOW_TARGET_MS`] in its unit, when the schema admits that value.
fn slow_payload(decl: &CapabilityDeclaration, base: &Value) -> (Value, bool) {
    let mut payload = base.clone();
    let mut set = false;
    let Some(props) = decl.input_schema.get("properties").and_then(Value::as_object) else { return (payload, false) };
    for (name, sub) in props {
        let numeric = matches!(sub.get("type").and_then(Value::as_str), Some("number" | "integer"));
        let Some(unit) = duration_member(name).filter(|_| numeric) else { continue };
        let mut candidate = payload.clone();
        candidate[name.as_str()] = serde_json::json!(SLOW_TARGET_MS / unit);
        let ok = a2a_core::negotiation::AgreedSchema::compile(&decl.input_schema)
            .map(|s| s.is_valid(&candidate))
            .unwrap_or(false);
        if ok {
            payload = candidate;
            set = true;
        }
    }
    (payload, set)
}

/// The slow capability: named by `--slow-capability` (with `--slow-payload`), else the drivable capability with the
/// largest declared `estimated_latency_ms` of at least [`SLOW_TARGET_MS`], else one with a duration member in its
/// input. The checks that drive it measure whether it is slow and say so when it is not.
fn slow_plan(
    advertised: &[&CapabilityDeclaration],
    opts: &Options,
    plan_of: &dyn Fn(&CapabilityDeclaration) -> Option<CapPlan>,
) -> Result<CapPlan, String> {
    if let Some(name) = &opts.slow_capability {
        let mut p = named_plan(advertised, name, plan_of).ok_or_else(|| {
            format!(
                "--slow-capability {name}: the agent does not advertise it, or the run lacks its credentials, or \
                 the suite cannot make a payload for its input_schema"
            )
        })?;
        p.why = match &opts.slow_payload {
            Some(v) => {
                p.payload = v.clone();
                "named by --slow-capability, with the --slow-payload payload".to_owned()
            }
            None => {
                let (payload, set) = slow_payload(&p.decl, &p.payload);
                p.payload = payload;
                if set {
                    format!("named by --slow-capability, its duration member set to {SLOW_TARGET_MS} ms")
                } else {
                    "named by --slow-capability (give --slow-payload for a slower run)".to_owned()
                }
            }
        };
        return Ok(p);
    }
    let mut by_latency: Vec<(&CapabilityDeclaration, u64)> =
        advertised.iter().filter_map(|d| d.estimated_latency_ms.map(|l| (*d, l))).collect();
    by_latency.sort_by_key(|(_, l)| std::cmp::Reverse(*l));
    for (d, latency) in by_latency.into_iter().filter(|(_, l)| *l >= SLOW_TARGET_MS) {
        if let Some(mut p) = plan_of(d) {
            let (payload, _) = slow_payload(d, &p.payload);
            p.payload = payload;
            p.why = format!("the drivable capability with the largest declared estimated_latency_ms ({latency} ms)");
            return Ok(p);
        }
    }
    for d in advertised {
        if let Some(mut p) = plan_of(d) {
            let (payload, set) = slow_payload(d, &p.payload);
            if set {
                p.payload = payload;
                p.why = format!(
                    "no capability declares estimated_latency_ms of {SLOW_TARGET_MS} ms or more; its input has a \
                     duration member, set to {SLOW_TARGET_MS} ms"
                );
                return Ok(p);
            }
        }
    }
    Err(format!(
        "no capability the suite can drive declares estimated_latency_ms of {SLOW_TARGET_MS} ms or more or has a \
         duration member in its input (seconds, delay_ms, ...), so the suite cannot outlast a deadline or a CANCEL; \
         name one with --slow-capability (and --slow-payload)"
    ))
}

/// One exchange of the run, for the checks that look at every response (HDR-2, HDR-7, TR-6, ERR-1, ST-4).
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The check that sent it (`discovery` for the run's own DISCOVER).
    pub check: &'static str,
    /// The method.
    pub method: String,
    /// The URL.
    pub url: String,
    /// The request headers.
    pub request_headers: Vec<(String, String)>,
    /// The response, if one came.
    pub response: Option<Resp>,
    /// When the suite recorded it (Unix seconds), to compare with the agent's `Date` (INT-11).
    pub at: i64,
}

/// Everything a check can use.
pub struct Ctx {
    /// The options.
    pub opts: Options,
    /// The HTTP client (HTTP/1.1).
    pub client: reqwest::Client,
    /// The A2A endpoint, ending in `/a2a`.
    pub endpoint: String,
    /// The agent as discovered.
    pub disc: Discovery,
    /// The plan.
    pub plan: Plan,
    /// The caller identity, when the run has one.
    pub identity: Option<Arc<Identity>>,
    /// The suite's DID host, with `--serve-did`.
    pub didhost: Option<DidHost>,
    /// `GET /.well-known/agent-card.json` on the endpoint's origin, probed once by the bridge checks (§20).
    pub(crate) bridge_card: std::sync::OnceLock<Result<Resp, String>>,
    transcript: Mutex<Vec<Exchange>>,
}

impl Ctx {
    /// A context (discovery and plan already made).
    pub fn new(
        opts: Options,
        client: reqwest::Client,
        endpoint: String,
        identity: Option<Arc<Identity>>,
        didhost: Option<DidHost>,
    ) -> Ctx {
        let disc = Discovery::default();
        let plan = Plan::choose(&disc, identity.as_ref(), &opts);
        Ctx {
            opts,
            client,
            endpoint,
            disc,
            plan,
            identity,
            didhost,
            bridge_card: std::sync::OnceLock::new(),
            transcript: Mutex::new(Vec::new()),
        }
    }

    /// The agent's DID (from DISCOVER), or `""` when it gave none.
    pub fn agent_did(&self) -> &str {
        self.disc.agent_did.as_deref().unwrap_or("")
    }

    /// Whether the agent is on this machine (its endpoint's host is a loopback name or address), so that it can reach
    /// the suite's own loopback listener.
    pub fn target_is_loopback(&self) -> bool {
        url::Url::parse(&self.endpoint).ok().and_then(|u| u.host().map(|h| h.to_owned())).is_some_and(|host| match host
        {
            url::Host::Domain(d) => d == "localhost" || d.ends_with(".localhost"),
            url::Host::Ipv4(ip) => ip.is_loopback(),
            url::Host::Ipv6(ip) => ip.is_loopback(),
        })
    }

    /// The URL of a path below the endpoint (`"/negotiate"`; `""` is the endpoint itself).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint)
    }

    /// A request with no header at all.
    pub fn bare(&self, method: &str, path: &str) -> Req {
        Req::new(method, self.url(path))
    }

    /// A request with `A2A-Version: 0.3` and the unsigned sender.
    pub fn request(&self, method: &str, path: &str) -> Req {
        self.bare(method, path).header("A2A-Version", a2a_core::PROTOCOL_VERSION).header("A2A-Sender-ID", SENDER_A)
    }

    /// A request to a step about `plan`'s capability, authenticated as the plan says: sender, region, API key,
    /// signature (`payload_hash` for requests with a body, `header_only` for RESULT).
    pub fn for_cap(&self, plan: &CapPlan, method: &str, path: &str) -> Req {
        let mut req = self
            .bare(method, path)
            .header("A2A-Version", a2a_core::PROTOCOL_VERSION)
            .header("A2A-Sender-ID", plan.sender());
        if let Some(r) = &plan.region {
            req = req.header("A2A-Region", r.clone());
        }
        match &plan.auth {
            CallerAuth::None => {}
            CallerAuth::ApiKey(k) => req = req.header("A2A-Api-Key", k.clone()),
            CallerAuth::Signed(id) => {
                let coverage = if method == "GET" { Coverage::HeaderOnly } else { Coverage::PayloadHash };
                req = req.signed(Signing::new(id.clone(), coverage));
            }
        }
        req
    }

    /// Signs (when asked) and sends a request, recording the exchange in the transcript.
    pub async fn send(&self, check: &'static str, req: &mut Req) -> Result<Resp, String> {
        crate::identity::apply_signing(req, self.agent_did())?;
        let res = crate::http::send(&self.client, req, self.opts.timeout).await;
        self.log(check, req, res.as_ref().ok().cloned());
        res
    }

    /// Signs (when asked) and sends a request whose answer is read as Server-Sent Events (§18, §17.6): returns once
    /// the head has arrived, and records the head in the transcript. The whole exchange is bounded by the request
    /// time limit plus `--result-timeout`.
    /// Returns the stream and the index of its exchange in the transcript, for [`Ctx::update_response`].
    pub async fn open_stream(&self, check: &'static str, req: &mut Req) -> Result<(crate::sse::Stream, usize), String> {
        crate::identity::apply_signing(req, self.agent_did())?;
        let total = self.opts.timeout + self.opts.result_timeout;
        let res = crate::sse::open(&self.client, req, self.opts.timeout, total).await;
        let index = self.log(check, req, res.as_ref().ok().map(|s| s.head().clone()));
        res.map(|s| (s, index))
    }

    /// Replaces the response of the transcript's exchange `index` (a stream's head by what was read of it).
    pub fn update_response(&self, index: usize, resp: Resp) {
        let mut transcript = self.transcript.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(ex) = transcript.get_mut(index) {
            ex.response = Some(resp);
        }
    }

    /// Adds an exchange to the transcript; returns its index.
    fn log(&self, check: &'static str, req: &Req, response: Option<Resp>) -> usize {
        let ex = Exchange {
            check,
            method: req.method.clone(),
            url: req.url.clone(),
            request_headers: req.headers.clone(),
            response,
            at: crate::identity::unix_now(),
        };
        let mut transcript = self.transcript.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        transcript.push(ex);
        transcript.len() - 1
    }

    /// Every exchange so far.
    pub fn transcript(&self) -> Vec<Exchange> {
        self.transcript.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Sets the discovery and re-plans.
    pub fn set_discovery(&mut self, disc: Discovery) {
        self.plan = Plan::choose(&disc, self.identity.as_ref(), &self.opts);
        self.disc = disc;
    }
}

/// The A2A endpoint of a URL (TR-2): the URL itself when its path ends in `/a2a`, else with `/a2a` appended.
pub fn endpoint_of(target: &str) -> Result<String, String> {
    let url = url::Url::parse(target).map_err(|e| format!("--target {target:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("--target {target:?} must be an http:// or https:// URL"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("--target {target:?} must not have a query or fragment"));
    }
    let s = url.as_str().trim_end_matches('/').to_owned();
    Ok(if s.ends_with("/a2a") { s } else { format!("{s}/a2a") })
}

#[cfg(test)]
mod tests {
    use super::endpoint_of;

    #[test]
    fn endpoint_appends_a2a_when_missing() {
        assert_eq!(endpoint_of("https://agent.example.com").as_deref(), Ok("https://agent.example.com/a2a"));
        assert_eq!(endpoint_of("https://agent.example.com/").as_deref(), Ok("https://agent.example.com/a2a"));
        assert_eq!(endpoint_of("https://agent.example.com/a2a").as_deref(), Ok("https://agent.example.com/a2a"));
        assert_eq!(endpoint_of("http://127.0.0.1:8080/x/a2a/").as_deref(), Ok("http://127.0.0.1:8080/x/a2a"));
        assert!(endpoint_of("ftp://x").is_err());
        assert!(endpoint_of("not a url").is_err());
    }
}
