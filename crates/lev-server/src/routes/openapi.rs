//! `GET /v1/openapi.json` (no token): the OpenAPI 3.1 document of every
//! route (SPEC section 17), made from the handlers' `#[utoipa::path]`
//! annotations and the wire types' `ToSchema` (lev-protocol's `openapi`
//! feature), so a body's schema is the type the handler parses or writes.
//!
//! The errors every route shares are added here, once, by [`SharedErrors`]:
//! each is the JSON error body ([`ErrorBody`]). A route's own errors (404,
//! 409, 410, ...) are in its annotation. CI drives the real server from
//! this document with schemathesis (`scripts/api-check.sh`), and a response
//! the document does not describe fails that run.

use std::sync::LazyLock;

use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use lev_protocol::api::ErrorBody;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "lev",
        description = "The control plane for AI agents' questions and tool approvals. \
            Send `Authorization: Bearer <token>`; the role each route needs is in its description. \
            Every error is `{\"error\": {\"code\", \"message\"}}`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        super::misc::health,
        super::misc::keys,
        super::people::keys,
        super::people::register,
        super::people::revoke,
        super::people::passkey_options,
        super::people::register_passkey,
        openapi_json,
        super::interactions::create,
        super::interactions::list,
        super::interactions::get_one,
        super::wait::wait,
        super::respond::respond,
        super::interactions::cancel,
        super::misc::blob,
        super::events::events,
        super::tokens::create,
        super::tokens::list,
        super::tokens::revoke,
        super::webhooks::create,
        super::webhooks::list,
        super::webhooks::delete,
        super::webhooks::deliveries,
        crate::slack::interact::interactions,
        super::audit::audit,
        super::stats::stats,
        super::hooks::claude_code,
        super::approvals::gate,
        super::approvals::list_grants,
        super::approvals::revoke_grant,
        super::approvals::consume_nonce,
        super::approvals::rotate_key,
        super::approvals::remove_key,
        crate::operators::ws::upgrade,
        super::sessions::ask,
        super::sessions::spawn,
        super::tasks::post_result,
        super::tasks::list,
        super::tasks::get_one,
        super::misc::metrics,
        crate::dashboard::index,
        crate::dashboard::assets,
        crate::dashboard::login,
        crate::dashboard::logout,
        crate::dashboard::me,
        crate::dashboard::operators,
    ),
    components(schemas(ErrorBody, lev_protocol::StoredPart)),
    modifiers(&SharedErrors),
    security(("bearer" = [])),
)]
struct ApiDoc;

/// The document, made once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    serde_json::to_value(ApiDoc::openapi())
        .and_then(|mut doc| {
            add_links(&mut doc);
            serde_json::to_string_pretty(&doc)
        })
        .unwrap_or_else(|e| format!(r#"{{"error":"the document did not serialise: {e}"}}"#))
});

/// The document as JSON text.
pub fn document() -> &'static str {
    &DOCUMENT
}

/// `GET /v1/openapi.json`.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "server", security(()),
    responses((status = 200, description = "This document (OpenAPI 3.1)", content_type = "application/json", body = Object)))]
pub async fn openapi_json() -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        document(),
    )
        .into_response()
}

/// Adds the bearer scheme and the errors every route shares.
struct SharedErrors;

impl Modify for SharedErrors {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A token made by `lev token create` (or the dashboard's session cookie with its CSRF token)",
                    ))
                    .build(),
            ),
        );
        for (path, item) in &mut doc.paths.paths {
            for (method, op) in operations(item) {
                add_shared(op);
                op.operation_id = Some(operation_id(method, path));
            }
        }
    }
}

/// A unique operation id: the method and the path's words
/// (`post /v1/interactions/{id}/respond` -> `post_interactions_id_respond`).
/// The handlers' names repeat (`list`, `get_one`, ...), and an OpenAPI
/// document's operation ids may not.
fn operation_id(method: &str, path: &str) -> String {
    let words: Vec<&str> = path
        .split('/')
        .map(|w| w.trim_matches(|c| c == '{' || c == '}'))
        .filter(|w| !w.is_empty() && *w != "v1")
        .collect();
    format!("{method}_{}", words.join("_")).replace(['.', '-'], "_")
}

/// Links from what makes a thing to what reads, answers or removes it, so a
/// client (and schemathesis's stateful phase) can follow them:
/// `(from method, from path, status, to method, to path, parameter, value)`.
#[rustfmt::skip]
const LINKS: &[(&str, &str, &str, &str, &str, &str, &str)] = &[
    ("post", "/v1/interactions", "201", "get", "/v1/interactions/{id}", "id", "$response.body#/id"),
    ("post", "/v1/interactions", "201", "get", "/v1/interactions/{id}/wait", "id", "$response.body#/id"),
    ("post", "/v1/interactions", "201", "post", "/v1/interactions/{id}/respond", "id", "$response.body#/id"),
    ("post", "/v1/interactions", "201", "post", "/v1/interactions/{id}/cancel", "id", "$response.body#/id"),
    ("get", "/v1/interactions", "200", "get", "/v1/interactions/{id}", "id", "$response.body#/items/0/request/id"),
    ("post", "/v1/webhooks", "201", "get", "/v1/webhooks/{id}/deliveries", "id", "$response.body#/id"),
    ("post", "/v1/webhooks", "201", "delete", "/v1/webhooks/{id}", "id", "$response.body#/id"),
    ("get", "/v1/grants", "200", "delete", "/v1/grants/{id}", "id", "$response.body#/items/0/id"),
    ("get", "/v1/tasks", "200", "get", "/v1/tasks/{id}", "id", "$response.body#/items/0/id"),
    ("get", "/v1/people/keys", "200", "delete", "/v1/people/keys/{kid}", "kid", "$response.body#/keys/0/kid"),
];

/// Adds [`LINKS`] to the document's JSON. (utoipa 5.5 writes a link's
/// fields in snake case, which OpenAPI does not read, so links are added
/// here, as JSON.)
fn add_links(doc: &mut serde_json::Value) {
    for (from_method, from_path, status, to_method, to_path, param, value) in LINKS {
        let Some(response) = doc
            .pointer_mut(&format!(
                "/paths/{}/{from_method}/responses/{status}",
                from_path.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(serde_json::Value::as_object_mut)
        else {
            continue;
        };
        let to = operation_id(to_method, to_path);
        let links = response
            .entry("links")
            .or_insert_with(|| serde_json::json!({}));
        links[&to] = serde_json::json!({"operationId": to, "parameters": {*param: value}});
    }
}

/// Every operation of a path item, with its method.
fn operations(item: &mut PathItem) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    [
        ("get", item.get.as_mut()),
        ("put", item.put.as_mut()),
        ("post", item.post.as_mut()),
        ("delete", item.delete.as_mut()),
        ("options", item.options.as_mut()),
        ("head", item.head.as_mut()),
        ("patch", item.patch.as_mut()),
        ("trace", item.trace.as_mut()),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.map(|op| (method, op)))
}

/// Whether `op` is open to anyone (its annotation says `security(())`).
fn is_public(op: &Operation) -> bool {
    op.security
        .as_ref()
        .is_some_and(|s| !s.is_empty() && s.iter().all(is_empty_requirement))
}

fn is_empty_requirement(req: &utoipa::openapi::security::SecurityRequirement) -> bool {
    serde_json::to_value(req).is_ok_and(|v| v.as_object().is_some_and(serde_json::Map::is_empty))
}

fn add_shared(op: &mut Operation) {
    let takes_input =
        op.request_body.is_some() || op.parameters.as_ref().is_some_and(|p| !p.is_empty());
    let mut shared: Vec<(&str, &str)> = vec![
        (
            "400",
            "Malformed: a body that is not JSON, a bad path parameter",
        ),
        ("503", "Shutting down, or the store is unavailable"),
    ];
    if !is_public(op) {
        shared.push(("401", "No token, or an unknown or revoked one"));
        shared.push(("403", "The token's role or scope does not allow this"));
    }
    if takes_input {
        shared.push(("413", "The body is too large"));
        shared.push((
            "422",
            "Well-formed but invalid: the message names the field",
        ));
    }
    for (status, description) in shared {
        if op.responses.responses.contains_key(status) {
            continue;
        }
        let response = ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build();
        op.responses
            .responses
            .insert(status.to_owned(), response.into());
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::document;

    /// Every `.route("...")` the router is built from, by reading the
    /// source: a route added without its annotation fails here.
    fn routed() -> BTreeSet<String> {
        let sources = [include_str!("mod.rs"), include_str!("../dashboard.rs")];
        let mut paths = BTreeSet::new();
        for source in sources {
            let mut rest = source;
            while let Some(at) = rest.find(".route(") {
                rest = &rest[at + ".route(".len()..];
                let trimmed = rest.trim_start();
                if let Some(quoted) = trimmed.strip_prefix('"')
                    && let Some(end) = quoted.find('"')
                {
                    paths.insert(quoted[..end].to_owned());
                }
            }
        }
        paths
    }

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let doc: Value = serde_json::from_str(document()).expect("the document is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        let documented: BTreeSet<String> = doc["paths"]
            .as_object()
            .expect("paths")
            .keys()
            .cloned()
            .collect();
        let routed = routed();
        assert!(routed.len() > 30, "the route scan found {routed:?}");
        assert_eq!(documented, routed);
    }

    #[test]
    fn operation_ids_are_unique_and_every_link_names_one() {
        let doc: Value = serde_json::from_str(document()).expect("the document is JSON");
        let mut ids = BTreeSet::new();
        for item in doc["paths"].as_object().expect("paths").values() {
            for op in item.as_object().expect("item").values() {
                let id = op["operationId"].as_str().expect("an operationId");
                assert!(ids.insert(id.to_owned()), "{id} twice");
            }
        }
        let mut links = 0;
        for item in doc["paths"].as_object().expect("paths").values() {
            for op in item.as_object().expect("item").values() {
                for response in op["responses"].as_object().expect("responses").values() {
                    for link in response["links"].as_object().into_iter().flatten() {
                        let to = link.1["operationId"].as_str().expect("operationId");
                        assert!(ids.contains(to), "a link to {to}, which is no operation");
                        links += 1;
                    }
                }
            }
        }
        assert_eq!(links, super::LINKS.len());
    }

    #[test]
    fn every_error_is_the_error_body() {
        let doc: Value = serde_json::from_str(document()).expect("the document is JSON");
        let mut checked = 0;
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("item") {
                for (status, response) in op["responses"].as_object().expect("responses") {
                    if status.starts_with('4') || status.starts_with('5') {
                        assert_eq!(
                            response["content"]["application/json"]["schema"]["$ref"],
                            "#/components/schemas/ErrorBody",
                            "{method} {path} {status}"
                        );
                        checked += 1;
                    }
                }
                assert!(
                    op["responses"].get("503").is_some(),
                    "{method} {path} lacks 503"
                );
            }
        }
        assert!(checked > 100, "{checked}");
    }
}
