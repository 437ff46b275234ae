//! A `form` answered in the dashboard in a real headless Chromium: labels,
//! inputs by type, defaults filled in, the server's refusal shown under each
//! failing field, then a corrected answer reaching the worker exactly.

use reqwest::StatusCode;
use serde_json::json;

use super::browser_support::Browser;
use crate::support::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_filled_in_field_by_field_with_errors_by_field() {
    let s = TestServer::start().await;
    let worker = s.token("agent-1", "worker", None).await;
    let alice = s.token("alice", "approver", None).await;
    let b = Browser::start().await;
    b.goto(&format!("{}/#token={alice}", s.url)).await;
    b.wait_text("#me-name", "alice").await;

    // Sent as text: a serde_json::Value would sort the properties, and the
    // form shows them in the order written.
    let body = r#"{"session_id": "s-form", "title": "Release details", "kind": {"type": "form",
        "prompt": "Fill in the release before I tag it",
        "schema": {"type": "object", "title": "Release", "properties": {
            "version": {"type": "string", "title": "Version", "description": "Semantic version", "minLength": 5},
            "owner": {"type": "string", "title": "Owner", "format": "email"},
            "day": {"type": "string", "title": "Release day", "format": "date"},
            "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 9, "default": 3},
            "channel": {"type": "string", "title": "Channel", "enum": ["stable", "beta"], "enumNames": ["Stable", "Beta"], "default": "stable"},
            "canary": {"type": "boolean", "title": "Canary first", "default": true}
        }, "required": ["version", "owner"]}}}"#;
    let resp = s
        .req(reqwest::Method::POST, "/v1/interactions", &worker)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created: serde_json::Value = resp.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let item = format!("#inbox-list li.item[data-id='{id}']");
    let detail = format!("#detail article.detail[data-id='{id}']");
    b.wait_css(&item).await;
    b.click(&item).await;
    b.wait_css(&format!("{detail} .answer form.form-fields"))
        .await;

    // Labels in the schema's order, inputs by type, defaults filled in.
    let shape = b
        .js(&format!(
            "return [...document.querySelectorAll(\"{detail} .form-field\")].map((f) => {{
               const i = f.querySelector('input,select');
               return [f.dataset.name, f.querySelector('label').textContent, i.tagName.toLowerCase(),
                 i.type || '', i.type === 'checkbox' ? String(i.checked) : i.value];
             }})"
        ))
        .await;
    assert_eq!(
        shape,
        json!([
            ["version", "Version *", "input", "text", ""],
            ["owner", "Owner *", "input", "email", ""],
            ["day", "Release day", "input", "date", ""],
            ["replicas", "Replicas", "input", "number", "3"],
            ["channel", "Channel", "select", "select-one", "stable"],
            ["canary", "Canary first", "input", "checkbox", "true"]
        ]),
        "{shape}"
    );
    assert!(
        b.text(&format!("{detail} .field-help"))
            .await
            .contains("Semantic version")
    );

    // Wrong values: the server refuses, each failing field says why.
    b.type_into(&format!("{detail} input[data-field='version']"), "1.0")
        .await;
    b.type_into(
        &format!("{detail} input[data-field='owner']"),
        "not-an-address",
    )
    .await;
    b.js(&format!(
        "const r = document.querySelector(\"{detail} input[data-field='replicas']\"); r.value = '12';"
    ))
    .await;
    b.click(&format!("{detail} .answer .actions button.primary"))
        .await;
    b.wait_css(&format!(
        "{detail} .field-error[data-field-error='owner']:not([hidden])"
    ))
    .await;
    let errors = b
        .js(&format!(
            "return Object.fromEntries([...document.querySelectorAll(\"{detail} .field-error:not([hidden])\")]
               .map((e) => [e.dataset.fieldError, e.textContent]))"
        ))
        .await;
    let errors = errors.as_object().unwrap();
    let names: Vec<&str> = errors.keys().map(String::as_str).collect();
    assert_eq!(names, ["owner", "replicas", "version"], "{errors:?}");
    assert!(errors["owner"].as_str().unwrap().contains("email address"));
    assert!(errors["replicas"].as_str().unwrap().contains("at most 9"));
    assert!(
        errors["version"]
            .as_str()
            .unwrap()
            .contains("at least 5 characters")
    );
    b.screenshot("form-errors").await;
    let (_, got) = s.get(&format!("/v1/interactions/{id}"), &alice).await;
    assert_eq!(got["request"]["status"], "pending", "nothing stored: {got}");

    // Corrected: the answer reaches the worker with each value typed.
    b.js(&format!(
        "const set = (n, v) => {{ const i = document.querySelector(\"{detail} [data-field='\" + n + \"']\"); i.value = v; }};
         set('version', '1.0.0'); set('owner', 'ops@example.org'); set('replicas', '5');
         set('day', '2026-12-24'); set('channel', 'beta');
         document.querySelector(\"{detail} input[data-field='canary']\").click();"
    ))
    .await;
    b.screenshot("form-filled").await;
    b.click(&format!("{detail} .answer .actions button.primary"))
        .await;
    let (status, v) = s
        .get(&format!("/v1/interactions/{id}/wait?timeout_s=10"), &worker)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["status"], "answered", "{v}");
    assert_eq!(
        v["response"]["fields"],
        json!({"version": "1.0.0", "owner": "ops@example.org", "day": "2026-12-24",
               "replicas": 5, "channel": "beta", "canary": false})
    );
    b.close().await;
}
