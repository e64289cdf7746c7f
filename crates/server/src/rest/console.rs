//! The web console's files, built into the binary (`crates/server/ui/`) and served on the management port at
//! `/ui/` (`/ui/index.html` as Couchbase serves its console; `/ui` redirects there).
//!
//! The files need no credentials, as Couchbase's do: they hold no data. Every data call the page makes carries the
//! user's Basic credentials and the `ns-server-ui: yes` header, for which [`no_browser_prompt`] drops the
//! `WWW-Authenticate` challenge from a 401 (ns_server does the same), so a wrong password shows the page's own
//! error instead of the browser's login dialog.
//!
//! Caching: every answer carries a strong `ETag` (a hash of the file, computed once) and `Cache-Control:
//! no-cache`, so a browser keeps its copy and revalidates it (a 304 costs one round trip) and never runs a stale
//! script after an upgrade. The page's Content-Security-Policy allows only this origin: the console loads nothing
//! from anywhere else.

use std::sync::OnceLock;

use axum::extract::{Path, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};

use super::error::RestError;

/// One built-in file.
struct Asset {
    name: &'static str,
    body: &'static [u8],
}

impl Asset {
    /// The content type, from the file's extension (the console has HTML, CSS and JavaScript only).
    fn content_type(&self) -> &'static str {
        match self.name.rsplit('.').next() {
            Some("html") => "text/html; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            _ => "text/javascript; charset=utf-8",
        }
    }
}

/// One file of `crates/server/ui/`, built into the binary.
macro_rules! asset {
    ($name:literal) => {
        Asset { name: $name, body: include_bytes!(concat!("../../ui/", $name)) }
    };
}

/// Every file of the console; anything else under `/ui/` is a 404.
const ASSETS: &[Asset] = &[
    asset!("index.html"),
    asset!("console.css"),
    asset!("api.js"),
    asset!("chart.js"),
    asset!("overview.js"),
    asset!("buckets.js"),
    asset!("documents.js"),
    asset!("security.js"),
    asset!("latency.js"),
    asset!("collections.js"),
    asset!("query.js"),
    asset!("app.js"),
];

/// Only this origin, no inline script, no frames around the console (clickjacking).
const CSP: &str =
    "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The header the console sends with every data call (ns_server's UI sends the same).
pub(crate) const UI_HEADER: &str = "ns-server-ui";

/// `GET /ui`: Couchbase's console lives at `/ui/index.html`.
pub(crate) async fn redirect() -> Redirect {
    Redirect::temporary("/ui/index.html")
}

/// `GET /ui/`: the page.
pub(crate) async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

/// `GET /ui/<file>`: one of the console's files, or 404.
pub(crate) async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some((i, asset)) = ASSETS.iter().enumerate().find(|(_, a)| a.name == name) else {
        return RestError::NotFound.into_response();
    };
    let etag = &etags()[i];
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if cached {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = asset.body.into_response();
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type()));
        r
    };
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    response
}

/// The strong entity tag of each asset, in `ASSETS` order: the first 16 bytes of its SHA-256, quoted.
fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = Sha256::digest(a.body);
                let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
                format!("\"{hex}\"")
            })
            .collect()
    })
}

/// Drops the Basic challenge from a 401 answered to the console (a request with `ns-server-ui: yes`): with it, a
/// browser would open its own login dialog over the page.
pub(crate) async fn no_browser_prompt(request: Request, next: Next) -> Response {
    let from_console = request.headers().get(UI_HEADER).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"yes"));
    let mut response = next.run(request).await;
    if from_console && response.status() == StatusCode::UNAUTHORIZED {
        response.headers_mut().remove(header::WWW_AUTHENTICATE);
    }
    response
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::ServiceExt;

    use super::*;
    use crate::rest::testing::TestApp;

    async fn get(app: &TestApp, uri: &str, extra: &[(&str, &str)]) -> (StatusCode, HeaderMap, Vec<u8>) {
        let mut request = axum::http::Request::builder().method("GET").uri(uri);
        for (k, v) in extra {
            request = request.header(*k, *v);
        }
        let router = crate::rest::mgmt_router(app.state.clone());
        let response = router.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 24).await.unwrap();
        (parts.status, parts.headers, bytes.to_vec())
    }

    #[tokio::test]
    async fn console_files_are_served_without_credentials_with_their_types() {
        // Proves `/ui/` and `/ui/index.html` answer the page and each script its JavaScript type, with no
        // credentials, and that `/ui` redirects to Couchbase's `/ui/index.html`.
        let app = TestApp::new();
        for uri in ["/ui/", "/ui/index.html"] {
            let (status, headers, body) = get(&app, uri, &[]).await;
            assert_eq!(status, StatusCode::OK, "{uri}");
            assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
            assert!(String::from_utf8_lossy(&body).contains("<title>settee console</title>"));
        }
        let (status, headers, _) = get(&app, "/ui/app.js", &[]).await;
        assert_eq!(
            (status, headers[header::CONTENT_TYPE].to_str().unwrap()),
            (StatusCode::OK, "text/javascript; charset=utf-8")
        );
        let (status, headers, _) = get(&app, "/ui", &[]).await;
        assert_eq!(
            (status, headers[header::LOCATION].to_str().unwrap()),
            (StatusCode::TEMPORARY_REDIRECT, "/ui/index.html")
        );
    }

    #[tokio::test]
    async fn unknown_console_paths_are_not_found() {
        // Proves only the built-in files are served: another name, a nested path or a path escape is a 404.
        let app = TestApp::new();
        for uri in ["/ui/nope.js", "/ui/x/app.js", "/ui/..%2fCargo.toml", "/ui/index.html/"] {
            assert_eq!(get(&app, uri, &[]).await.0, StatusCode::NOT_FOUND, "{uri}");
        }
    }

    #[tokio::test]
    async fn a_known_etag_is_answered_not_modified() {
        // Proves the caching contract: an ETag and `no-cache` on every file, and 304 with no body when the browser
        // revalidates with the same tag.
        let app = TestApp::new();
        let (_, headers, _) = get(&app, "/ui/api.js", &[]).await;
        assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
        let tag = headers[header::ETAG].to_str().unwrap().to_owned();
        let (status, _, body) = get(&app, "/ui/api.js", &[("if-none-match", &tag)]).await;
        assert_eq!((status, body.len()), (StatusCode::NOT_MODIFIED, 0));
        let (status, _, _) = get(&app, "/ui/api.js", &[("if-none-match", "\"other\"")]).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_failed_login_from_the_console_gets_no_browser_challenge() {
        // Proves a 401 keeps ns_server's Basic challenge for other clients but loses it for the console's calls,
        // so the browser shows the page's error rather than its own login dialog.
        let app = TestApp::new();
        let basic = "Basic QWRtaW5pc3RyYXRvcjp3cm9uZw=="; // Administrator:wrong
        let (status, headers, _) = get(&app, "/pools/default", &[("authorization", basic)]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(headers.contains_key(header::WWW_AUTHENTICATE));
        let (status, headers, _) =
            get(&app, "/pools/default", &[("authorization", basic), ("ns-server-ui", "yes")]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(!headers.contains_key(header::WWW_AUTHENTICATE));
    }
}
