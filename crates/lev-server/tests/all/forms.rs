//! The `form` kind through the front door: a schema outside the subset is
//! refused at create naming the keyword, an answer is checked against the
//! schema naming each failing property (nothing stored), a good one is
//! stored and read back whole.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, code, message};

fn form(schema: Value) -> Value {
    json!({"session_id": "s-1", "kind": {"type": "form", "prompt": "Your details", "schema": schema}})
}

const SIGNUP: &str = r#"{
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Full name", "minLength": 2, "maxLength": 40},
        "email": {"type": "string", "format": "email"},
        "age": {"type": "integer", "minimum": 18, "maximum": 130},
        "plan": {"type": "string", "enum": ["free", "pro"], "enumNames": ["Free", "Pro"], "default": "free"},
        "subscribe": {"type": "boolean", "default": false}
    },
    "required": ["name", "email"]
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_outside_the_subset_is_refused_naming_the_keyword() {
    let s = TestServer::start().await;
    let (worker, _) = s.worker_and_approver().await;
    let cases = [
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}),
            "kind.schema.properties.a.pattern",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object"}}}),
            "kind.schema.properties.a.type",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": []}),
            "kind.schema.oneOf",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "number", "minLength": 1}}}),
            "kind.schema.properties.a.minLength",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
            "kind.schema.required[0]",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "default": 1.5}}}),
            "kind.schema.properties.a.default",
        ),
    ];
    for (schema, field) in cases {
        let (status, v) = s.post("/v1/interactions", &worker, &form(schema)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert_eq!(code(&v), "invalid");
        assert!(message(&v).starts_with(field), "{field}: {v}");
    }
    let (_, list) = s.get("/v1/interactions?status=all", &s.admin).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "nothing stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_checked_against_its_schema() {
    let s = TestServer::start().await;
    let (worker, approver) = s.worker_and_approver().await;
    // Sent as text: a serde_json::Value would sort the properties.
    let body = format!(
        r#"{{"session_id": "s-1", "kind": {{"type": "form", "prompt": "Your details", "schema": {}}}}}"#,
        SIGNUP
    );
    let resp = s
        .req(reqwest::Method::POST, "/v1/interactions", &worker)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_owned();

    // The stored request keeps the properties in the order they were sent.
    let (_, got) = s.get(&format!("/v1/interactions/{id}"), &approver).await;
    let props: Vec<&String> = got["request"]["kind"]["schema"]["properties"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap();
    assert_eq!(props.len(), 5);
    let text = s
        .req(
            reqwest::Method::GET,
            &format!("/v1/interactions/{id}"),
            &approver,
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let order: Vec<usize> = [
        "\"name\"",
        "\"email\"",
        "\"age\"",
        "\"plan\"",
        "\"subscribe\"",
    ]
    .iter()
    .map(|k| text.find(k).unwrap())
    .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "schema order kept: {text}"
    );

    // Each failing property is named, with why; nothing is stored.
    let bad = json!({"request_id": id, "fields": {
        "name": "A", "email": "not-an-address", "age": 17.5, "plan": "gold", "extra": 1
    }});
    let (status, v) = s.respond(&approver, &id, &bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let fields = v["error"]["fields"].as_object().unwrap();
    let names: Vec<&str> = fields.keys().map(String::as_str).collect();
    assert_eq!(names, ["age", "email", "extra", "name", "plan"], "{v}");
    assert!(fields["age"].as_str().unwrap().contains("integer"), "{v}");
    assert!(fields["email"].as_str().unwrap().contains("email"), "{v}");
    assert!(
        fields["name"].as_str().unwrap().contains("at least 2"),
        "{v}"
    );
    for name in names {
        assert!(message(&v).contains(name), "{v}");
    }
    let (status, v) = s
        .respond(
            &approver,
            &id,
            &json!({"request_id": id, "fields": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(
        v["error"]["fields"]["email"], "required, found nothing",
        "{v}"
    );
    let (status, v) = s
        .respond(&approver, &id, &json!({"request_id": id, "value": "text"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let (_, got) = s.get(&format!("/v1/interactions/{id}"), &approver).await;
    assert_eq!(got["request"]["status"], "pending", "nothing stored: {got}");
    assert!(got["response"].is_null());

    // A good answer is stored and read back whole.
    let good = json!({"request_id": id, "fields": {
        "name": "Ada Lovelace", "email": "ada@example.org", "age": 36, "plan": "pro", "subscribe": true
    }});
    let (status, v) = s.respond(&approver, &id, &good).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["response"]["fields"], good["fields"]);
    let (_, waited) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=1"), &worker)
        .await;
    assert_eq!(waited["status"], "answered");
    assert_eq!(waited["response"]["fields"]["age"], 36);
}
