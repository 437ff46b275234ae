//! A `form` through `lev show` and `lev respond --field` / `--fields-json`,
//! against a real server: values typed by the form's fields, a name the form
//! lacks refused before sending, the server's refusal naming each field.

use lev_protocol::InteractionKind;
use serde_json::json;

use crate::client_env::{LevServer, assert_code, block_on};

fn release() -> InteractionKind {
    let schema = serde_json::from_value(json!({"type": "object", "properties": {
        "version": {"type": "string", "title": "Version", "minLength": 5},
        "owner": {"type": "string", "format": "email"},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3},
        "ratio": {"type": "number"},
        "canary": {"type": "boolean"},
        "channel": {"type": "string", "enum": ["stable", "beta"], "enumNames": ["Stable", "Beta"]}
    }, "required": ["version", "owner"]}))
    .unwrap();
    InteractionKind::Form {
        prompt: "Release details?".to_owned(),
        schema,
    }
}

#[test]
fn respond_fills_in_a_form_field_by_field() {
    let server = LevServer::start("forms");
    let a = server.create("s-f", release());

    let run = server.lev(&["show", a.id()]);
    assert_code(&run, 0);
    for want in [
        "version (string, at least 5 characters), required: Version",
        "owner (string, email), required",
        "replicas (integer 1 to 9) [default 3]",
        "channel (one of: stable | beta)",
        "--field NAME=VALUE",
    ] {
        assert!(run.stdout.contains(want), "{want} missing:\n{}", run.stdout);
    }
    let run = server.lev(&["ls"]);
    assert!(run.stdout.contains("form"), "{}", run.stdout);

    // A name the form lacks, or a value its type refuses: said before sending.
    let run = server.lev(&[
        "respond",
        a.id(),
        "--field",
        "colour=red",
        "--field",
        "replicas=many",
    ]);
    assert_code(&run, 1);
    assert!(
        run.stderr.contains("colour: not a field of this form"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("replicas: expected an integer"),
        "{}",
        run.stderr
    );
    // The wrong flags for a form.
    let run = server.lev(&["respond", a.id(), "--text", "hi"]);
    assert_code(&run, 2);
    assert!(
        run.stderr.contains("a form is answered with --field"),
        "{}",
        run.stderr
    );

    // The server checks the rest, naming each field.
    let run = server.lev(&[
        "respond",
        a.id(),
        "--field",
        "version=1.0",
        "--field",
        "owner=nobody",
        "--field",
        "replicas=12",
    ]);
    assert_code(&run, 1);
    for want in [
        "version: at least 5 characters",
        "owner: expected an email address",
        "replicas: at most 9",
    ] {
        assert!(run.stderr.contains(want), "{want} missing:\n{}", run.stderr);
    }
    let view = block_on(server.client().get_interaction(a.id())).unwrap();
    assert!(view.response.is_none(), "nothing stored");

    let run = server.lev(&[
        "respond",
        a.id(),
        "--field",
        "version=1.4.0",
        "--field",
        "owner=ops@example.org",
        "--field",
        "replicas=5",
        "--field",
        "ratio=0.25",
        "--field",
        "canary=no",
        "--field",
        "channel=Beta",
    ]);
    assert_code(&run, 0);
    assert!(run.stdout.starts_with("answered"), "{}", run.stdout);
    let view = block_on(server.client().get_interaction(a.id())).unwrap();
    assert_eq!(
        serde_json::Value::Object(view.response.unwrap().fields.unwrap()),
        json!({"version": "1.4.0", "owner": "ops@example.org", "replicas": 5, "ratio": 0.25,
               "canary": false, "channel": "beta"})
    );

    // --fields-json, from a file too.
    let b = server.create("s-f", release());
    let run = server.lev(&["respond", b.id(), "--fields-json", "[1]"]);
    assert_code(&run, 1);
    assert!(
        run.stderr.contains("expected a JSON object"),
        "{}",
        run.stderr
    );
    let file = server.data_dir().join("answer.json");
    std::fs::write(&file, r#"{"version": "2.0.0", "owner": "dev@example.org"}"#).unwrap();
    let arg = format!("@{}", file.display());
    let run = server.lev(&["respond", b.id(), "--fields-json", &arg, "--json"]);
    assert_code(&run, 0);
    assert_eq!(run.json()["response"]["fields"]["version"], "2.0.0");
}

/// `lev ask --schema` prints the fields a person filled in as one JSON
/// object; the Rust SDK reads the same answer as a typed struct.
#[test]
fn ask_with_a_schema_prints_the_fields_and_the_sdk_types_them() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Release {
        version: String,
        replicas: u32,
    }
    let server = LevServer::start("ask-form");
    let person = crate::ask::answer_when_asked(&server, "ask-form", |id| {
        lev_protocol::InteractionResponse::form(
            id,
            json!({"version": "1.4.0", "replicas": 5})
                .as_object()
                .cloned()
                .unwrap(),
        )
    });
    let schema = r#"{"type":"object","properties":{"version":{"type":"string"},"replicas":{"type":"integer","minimum":1}},"required":["version"]}"#;
    let run = server.lev(&[
        "ask",
        "Release?",
        "--session",
        "ask-form",
        "--schema",
        schema,
        "--timeout",
        "60",
    ]);
    person.join().unwrap();
    assert_code(&run, 0);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&run.stdout).unwrap(),
        json!({"version": "1.4.0", "replicas": 5})
    );
    // A schema outside the subset: the server's 422 names the keyword.
    let run = server.lev(&[
        "ask",
        "Bad?",
        "--schema",
        r#"{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}"#,
    ]);
    assert_code(&run, 1);
    assert!(
        run.stderr.contains("kind.schema.properties.a.pattern"),
        "{}",
        run.stderr
    );

    // The SDK: the answer's fields as a struct.
    let client = server.client();
    let page = block_on(client.list_interactions(&lev_client::ListQuery {
        status: Some(lev_client::StatusFilter::Only(
            lev_protocol::InteractionStatus::Answered,
        )),
        ..Default::default()
    }))
    .unwrap();
    let id = page.items[0].request.id().to_owned();
    let answer =
        block_on(client.wait_for_answer(&id, Some(std::time::Duration::from_secs(5)))).unwrap();
    assert_eq!(
        answer.form::<Release>().unwrap(),
        Some(Release {
            version: "1.4.0".into(),
            replicas: 5
        })
    );
}
