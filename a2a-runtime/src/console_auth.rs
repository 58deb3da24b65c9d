//! The consoles' login (OPS-1, GW-22), shared by the agent's and the gateway's: the admin token as `Authorization:
//! Bearer`, or a login cookie made when a browser presented the token (the login form, or `?token=` once). The cookie
//! is `HttpOnly`, `SameSite=Strict`, scoped to `/console`, and carries an expiry and an HMAC-SHA256 of it keyed by
//! the token's digest — never the token — so that changing the token ends every login.

use std::time::{SystemTime, UNIX_EPOCH};

use a2a_core::error::{A2aError, ErrorCode};
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The cookie's name.
pub const COOKIE: &str = "a2a_console";

/// What a request's credentials are worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The token, or a valid login.
    Ok,
    /// No credential.
    Missing,
    /// A login that has expired.
    Expired,
    /// Another token, or a login made with another token.
    Invalid,
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The key of a token: its SHA-256 digest (what is kept in memory and compared).
pub fn key_of(token: &str) -> [u8; 32] {
    Sha256::digest(token.trim().as_bytes()).into()
}

/// HMAC-SHA256 (RFC 2104) with a 32-byte key.
fn hmac(key: &[u8; 32], msg: &[u8]) -> [u8; 32] {
    let mut ipad = [0x36u8; 64];
    let mut opad = [0x5cu8; 64];
    for (i, k) in key.iter().enumerate() {
        ipad[i] ^= k;
        opad[i] ^= k;
    }
    let inner = Sha256::new().chain_update(ipad).chain_update(msg).finalize();
    Sha256::new().chain_update(opad).chain_update(inner).finalize().into()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn mac(key: &[u8; 32], expires: u64) -> String {
    hex(&hmac(key, format!("a2a-console-login {expires}").as_bytes()))
}

/// Whether `given` is the token whose key is `key` (constant time).
pub fn token_matches(key: &[u8; 32], given: &str) -> bool {
    bool::from(key_of(given).ct_eq(key))
}

/// The `Set-Cookie` value of a login lasting `lifetime_s` (`Secure` when the request came over TLS).
pub fn cookie(key: &[u8; 32], lifetime_s: u64, secure: bool) -> String {
    let expires = now_s() + lifetime_s;
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{COOKIE}={expires}.{}; Path=/console; Max-Age={lifetime_s}; HttpOnly; SameSite=Strict{secure}",
        mac(key, expires)
    )
}

/// The `Set-Cookie` value that ends a login.
pub fn clear_cookie(secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}=; Path=/console; Max-Age=0; HttpOnly; SameSite=Strict{secure}")
}

/// The verdict on a request's credentials: a bearer token first, then the login cookie.
pub fn check(key: &[u8; 32], headers: &HeaderMap) -> Verdict {
    if let Some(v) = headers.get(header::AUTHORIZATION) {
        let given = v.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
        return if token_matches(key, given) { Verdict::Ok } else { Verdict::Invalid };
    }
    let mut verdict = Verdict::Missing;
    for v in headers.get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        for pair in v.split(';') {
            let Some((name, value)) = pair.trim().split_once('=') else { continue };
            if name != COOKIE {
                continue;
            }
            match login(key, value) {
                Verdict::Ok => return Verdict::Ok,
                other => verdict = other,
            }
        }
    }
    verdict
}

/// The login a request carries: an id of its cookie (SHA-256 of the cookie's value, hex) and when it expires (Unix
/// seconds). `None` without a valid login cookie (a bearer token is not a login). What a console keeps per browser
/// session — an uploaded signing key — is filed under this id.
pub fn login_of(key: &[u8; 32], headers: &HeaderMap) -> Option<(String, u64)> {
    for v in headers.get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        for pair in v.split(';') {
            let Some((name, value)) = pair.trim().split_once('=') else { continue };
            if name == COOKIE && login(key, value) == Verdict::Ok {
                let expires = value.split_once('.').and_then(|(e, _)| e.parse().ok()).unwrap_or(0);
                return Some((hex(&Sha256::digest(value.as_bytes())), expires));
            }
        }
    }
    None
}

fn login(key: &[u8; 32], value: &str) -> Verdict {
    let Some((expires, given)) = value.split_once('.') else { return Verdict::Invalid };
    let Ok(expires) = expires.parse::<u64>() else { return Verdict::Invalid };
    if !bool::from(mac(key, expires).as_bytes().ct_eq(given.as_bytes())) {
        return Verdict::Invalid;
    }
    if expires <= now_s() { Verdict::Expired } else { Verdict::Ok }
}

/// The `token` of a login form (`application/x-www-form-urlencoded`).
pub fn form_token(form: &[u8]) -> Option<String> {
    url::form_urlencoded::parse(form).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned())
}

/// The `token` of a URL's query.
pub fn query_token(uri: &axum::http::Uri) -> Option<String> {
    form_token(uri.query()?.as_bytes())
}

/// The policy of the login page: no script at all, its inline style.
pub const LOGIN_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The login form of `product`'s console: the only page served without the token, and it shows nothing else.
pub fn login_page(status: StatusCode, product: &str, message: Option<&str>) -> Response<Body> {
    let note = message.map(|m| format!("<p class=\"err\" role=\"alert\">{}</p>", escape_html(m))).unwrap_or_default();
    let product = escape_html(product);
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{product} console: log in</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <style>body{{font:16px system-ui,sans-serif;background:#f6f7f9;color:#1b1f24;margin:0}}\
         main{{max-width:26rem;margin:10vh auto;background:#fff;padding:2rem;border:1px solid #c9ced6;border-radius:8px}}\
         label{{display:block;margin:1rem 0 .3rem}}input{{width:100%;box-sizing:border-box;padding:.5rem;font:inherit;\
         border:1px solid #6b7380;border-radius:4px}}button{{margin-top:1rem;padding:.5rem 1.2rem;font:inherit;\
         background:#0b57d0;color:#fff;border:0;border-radius:4px}}button:focus,input:focus{{outline:3px solid #f5a623}}\
         .err{{color:#a50e0e}}</style></head><body><main><h1>{product} console</h1>{note}\
         <form method=\"post\" action=\"/console/login\"><label for=\"token\">Admin token</label>\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required autofocus>\
         <button type=\"submit\">Log in</button></form>\
         <p>The token is the one of <code>[admin] token_env</code> (or <code>token_file</code>).</p></main></body></html>"
    );
    let mut r = Response::new(Body::from(html));
    *r.status_mut() = status;
    secure_headers(r.headers_mut(), "text/html; charset=utf-8", LOGIN_CSP);
    r
}

/// `303 See Other` to `to`, setting `cookie` when given.
pub fn redirect(to: &'static str, cookie: Option<String>) -> Response<Body> {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::SEE_OTHER;
    secure_headers(r.headers_mut(), "text/plain; charset=utf-8", CSP);
    r.headers_mut().insert(header::LOCATION, HeaderValue::from_static(to));
    if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        r.headers_mut().insert(header::SET_COOKIE, c);
    }
    r
}

/// The answer to a request whose credentials are not worth `Ok`: the login form (`401`) for the page, a JSON `401`
/// (`auth_required` without credentials, `auth_invalid` with others) for everything else. `None` when they are.
pub fn refuse(key: &[u8; 32], headers: &HeaderMap, page: bool, product: &str) -> Option<Response<Body>> {
    let verdict = check(key, headers);
    if verdict == Verdict::Ok {
        return None;
    }
    if page {
        let why = (verdict == Verdict::Expired).then_some("Your login has expired; log in again.");
        return Some(login_page(StatusCode::UNAUTHORIZED, product, why));
    }
    let (code, why) = match verdict {
        Verdict::Missing => (ErrorCode::AUTH_REQUIRED, "the console requires the admin token: log in"),
        Verdict::Expired => (ErrorCode::AUTH_INVALID, "the console login has expired: log in again"),
        _ => (ErrorCode::AUTH_INVALID, "not the admin token (or a login made with another token)"),
    };
    let e = A2aError::with_message(code, why);
    let mut r = Response::new(Body::from(serde_json::to_vec(&e.to_body()).unwrap_or_default()));
    *r.status_mut() = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::UNAUTHORIZED);
    secure_headers(r.headers_mut(), "application/json", CSP);
    r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"a2a\""));
    Some(r)
}

/// The stylesheet both consoles serve (one file: the agent's console and the gateway's look the same).
pub const STYLE: &str = include_str!("console.css");

/// The DOM helpers every console script uses (`A2ADom`: `$`, `el`, `fmt`, the tabs pattern), served by both consoles
/// as `/console/assets/dom.js` and loaded before the other scripts.
pub const DOM_JS: &str = include_str!("console_dom.js");

/// The policy of the console's page: its own script and style only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Sets the headers every console answer carries: no caching, no sniffing, no framing, the policy given.
pub fn secure_headers(h: &mut axum::http::HeaderMap, content_type: &'static str, csp: &'static str) {
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(csp));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_test_case_2() {
        // Key "Jefe", zero-padded to the block like any short key.
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        assert_eq!(hex(&hmac(&key, b"what do ya want for nothing?")), want);
    }

    #[test]
    fn a_login_cookie_is_accepted_until_it_expires_and_only_with_its_token() {
        let key = key_of("secret");
        let other = key_of("another");
        let set = cookie(&key, 60, false);
        let value = set.split(';').next().expect("pair").to_owned();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, value.parse().expect("header"));
        assert_eq!(check(&key, &h), Verdict::Ok);
        assert_eq!(check(&other, &h), Verdict::Invalid);
        let past = now_s() - 1;
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("{COOKIE}={past}.{}", mac(&key, past)).parse().expect("header"));
        assert_eq!(check(&key, &h), Verdict::Expired);
        assert_eq!(check(&key, &HeaderMap::new()), Verdict::Missing);
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "Bearer secret".parse().expect("header"));
        assert_eq!(check(&key, &h), Verdict::Ok);
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/console"));
        assert!(!set.contains("secret"));
    }
}
