//! The `form` kind's schema subset and answers: each type and constraint
//! accepted and refused, every keyword outside the subset refused by name,
//! property tests of the bounds, and the limits checked in linear time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test that cannot unwrap has failed

use std::time::{Duration, Instant};

use lev_protocol::form::{
    Field, FieldType, Form, FormProperties, FormSchema, check_answer, check_value, parse_schema,
    value_from_text,
};
use lev_protocol::validate::{validate_request, validate_response};
use lev_protocol::{
    InteractionKind, InteractionRequest, InteractionResponse, Limits, ValidationErrorKind,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn schema(v: Value) -> FormSchema {
    serde_json::from_value(v).expect("a schema object")
}

fn one(prop: Value) -> Result<Form, String> {
    parse_schema(
        &schema(json!({"type": "object", "properties": {"f": prop}})),
        &Limits::default(),
    )
    .map_err(|e| e.to_string())
}

fn field(prop: Value) -> Field {
    one(prop).expect("a valid field").fields.remove(0)
}

fn accepts(prop: Value, value: Value) -> bool {
    check_value(&field(prop), &value).is_ok()
}

#[test]
fn each_type_and_constraint_is_accepted_and_refused() {
    let s = json!({"type": "string", "minLength": 2, "maxLength": 4});
    assert!(accepts(s.clone(), json!("ab")));
    assert!(
        accepts(s.clone(), json!("éèêë")),
        "length counts characters, not bytes"
    );
    assert!(!accepts(s.clone(), json!("a")));
    assert!(!accepts(s.clone(), json!("abcde")));
    assert!(!accepts(s, json!(12)));

    for (format, good, bad) in [
        ("email", "ada@example.org", "ada@"),
        ("email", "a.b+c@x-y.example", "a b@example.org"),
        ("uri", "https://example.org/a?b=c", "example.org"),
        ("uri", "mailto:ada@example.org", "https://exa mple.org"),
        ("date", "2024-02-29", "2023-02-29"),
        ("date", "2026-12-24", "2026-13-01"),
        ("date-time", "2026-12-24T10:00:00Z", "2026-12-24 10:00:00Z"),
        (
            "date-time",
            "2026-12-24T10:00:00.123+01:00",
            "2026-12-24T25:00:00Z",
        ),
    ] {
        let p = json!({"type": "string", "format": format});
        assert!(accepts(p.clone(), json!(good)), "{format} {good}");
        assert!(!accepts(p, json!(bad)), "{format} {bad}");
    }

    let e = json!({"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]});
    assert!(accepts(e.clone(), json!("b")));
    assert!(!accepts(e.clone(), json!("B")), "a label is not a value");
    assert!(!accepts(e.clone(), json!("c")));
    assert_eq!(value_from_text(&field(e.clone()), "B"), Ok(json!("b")));
    assert!(value_from_text(&field(e), "c").is_err());

    let i = json!({"type": "integer", "minimum": 1, "maximum": 10});
    assert!(accepts(i.clone(), json!(1)));
    assert!(accepts(i.clone(), json!(10)));
    assert!(
        accepts(i.clone(), json!(3.0)),
        "JSON Schema: 3.0 is an integer"
    );
    assert!(!accepts(i.clone(), json!(3.5)));
    assert!(!accepts(i.clone(), json!(0)));
    assert!(!accepts(i.clone(), json!(11)));
    assert!(!accepts(i.clone(), json!("3")));
    assert_eq!(value_from_text(&field(i.clone()), "7"), Ok(json!(7)));
    assert!(value_from_text(&field(i), "7.5").is_err());

    let n = json!({"type": "number", "minimum": -1.5, "maximum": 2.5});
    assert!(accepts(n.clone(), json!(-1.5)));
    assert!(accepts(n.clone(), json!(0.25)));
    assert!(!accepts(n.clone(), json!(2.6)));
    assert!(!accepts(n.clone(), json!(true)));
    assert_eq!(value_from_text(&field(n.clone()), "2"), Ok(json!(2)));
    assert_eq!(value_from_text(&field(n), "0.5"), Ok(json!(0.5)));

    let b = json!({"type": "boolean"});
    assert!(accepts(b.clone(), json!(false)));
    assert!(!accepts(b.clone(), json!("false")));
    assert!(!accepts(b.clone(), Value::Null));
    assert_eq!(value_from_text(&field(b.clone()), "yes"), Ok(json!(true)));
    assert!(value_from_text(&field(b), "maybe").is_err());
}

#[test]
fn a_keyword_outside_the_subset_is_refused_by_name() {
    for (prop, named) in [
        (
            json!({"type": "string", "pattern": "^a"}),
            "kind.schema.properties.f.pattern",
        ),
        (
            json!({"type": "array", "items": {}}),
            "kind.schema.properties.f.type",
        ),
        (json!({"type": "object"}), "kind.schema.properties.f.type"),
        (
            json!({"type": ["string", "null"]}),
            "kind.schema.properties.f.type",
        ),
        (json!({"title": "no type"}), "kind.schema.properties.f.type"),
        (
            json!({"type": "string", "const": "a"}),
            "kind.schema.properties.f.const",
        ),
        (
            json!({"type": "string", "oneOf": []}),
            "kind.schema.properties.f.oneOf",
        ),
        (
            json!({"type": "integer", "exclusiveMinimum": 1}),
            "kind.schema.properties.f.exclusiveMinimum",
        ),
        (
            json!({"type": "integer", "multipleOf": 2}),
            "kind.schema.properties.f.multipleOf",
        ),
        (
            json!({"type": "boolean", "minimum": 1}),
            "kind.schema.properties.f.minimum",
        ),
        (
            json!({"type": "integer", "format": "email"}),
            "kind.schema.properties.f.format",
        ),
        (
            json!({"type": "string", "format": "ipv4"}),
            "kind.schema.properties.f.format",
        ),
        (
            json!({"type": "string", "minLength": -1}),
            "kind.schema.properties.f.minLength",
        ),
        (
            json!({"type": "string", "minLength": 3, "maxLength": 2}),
            "kind.schema.properties.f.maxLength",
        ),
        (
            json!({"type": "integer", "minimum": 3, "maximum": 2}),
            "kind.schema.properties.f.maximum",
        ),
        (
            json!({"type": "string", "enum": []}),
            "kind.schema.properties.f.enum",
        ),
        (
            json!({"type": "string", "enum": [1]}),
            "kind.schema.properties.f.enum[0]",
        ),
        (
            json!({"type": "string", "enum": ["a", "a"]}),
            "kind.schema.properties.f.enum",
        ),
        (
            json!({"type": "string", "enum": ["a"], "enumNames": ["A", "B"]}),
            "kind.schema.properties.f.enumNames",
        ),
        (
            json!({"type": "string", "enumNames": ["A"]}),
            "kind.schema.properties.f.enumNames",
        ),
        (
            json!({"type": "string", "enum": ["a"], "format": "email"}),
            "kind.schema.properties.f.format",
        ),
        (
            json!({"type": "string", "enum": ["a"], "default": "b"}),
            "kind.schema.properties.f.default",
        ),
        (
            json!({"type": "boolean", "default": "yes"}),
            "kind.schema.properties.f.default",
        ),
        (
            json!({"type": "string", "format": "date", "default": "tomorrow"}),
            "kind.schema.properties.f.default",
        ),
        (json!("string"), "kind.schema.properties.f"),
    ] {
        let err = one(prop.clone()).expect_err(&prop.to_string());
        assert!(err.starts_with(&format!("{named}:")), "{prop}: {err}");
    }
    for (top, named) in [
        (
            json!({"properties": {"f": {"type": "string"}}}),
            "kind.schema.type",
        ),
        (
            json!({"type": "array", "properties": {"f": {"type": "string"}}}),
            "kind.schema.type",
        ),
        (
            json!({"type": "object", "properties": {}}),
            "kind.schema.properties",
        ),
        (
            json!({"type": "object", "properties": {"f": {"type": "string"}}, "allOf": []}),
            "kind.schema.allOf",
        ),
        (
            json!({"type": "object", "properties": {"f": {"type": "string"}}, "additionalProperties": true}),
            "kind.schema.additionalProperties",
        ),
        (
            json!({"type": "object", "properties": {"f": {"type": "string"}}, "required": "f"}),
            "kind.schema.required",
        ),
        (
            json!({"type": "object", "properties": {"f": {"type": "string"}}, "required": ["f", "f"]}),
            "kind.schema.required[1]",
        ),
        (
            json!({"type": "object", "properties": {"a b": {"type": "string"}}}),
            "kind.schema.properties",
        ),
    ] {
        let err = parse_schema(&schema(top.clone()), &Limits::default())
            .expect_err(&top.to_string())
            .to_string();
        assert!(err.starts_with(&format!("{named}:")), "{top}: {err}");
    }
    assert!(
        serde_json::from_value::<FormSchema>(
            serde_json::from_str(r#"{"type":"object","properties":{"a":{"type":"string"}}}"#)
                .unwrap()
        )
        .is_ok()
    );
    let twice = r#"{"type":"object","properties":{"a":{"type":"string"},"a":{"type":"integer"}}}"#;
    assert!(
        serde_json::from_str::<FormSchema>(twice).is_err(),
        "a property named twice"
    );
}

fn request(schema_value: Value) -> InteractionRequest {
    InteractionRequest {
        id: Some("ir_1".to_owned()),
        ..InteractionRequest::new(
            "s-1",
            InteractionKind::Form {
                prompt: "details".to_owned(),
                schema: schema(schema_value),
            },
        )
    }
}

fn answer(fields: Value) -> InteractionResponse {
    InteractionResponse::form("ir_1", fields.as_object().cloned().unwrap_or_default())
}

#[test]
fn an_answer_names_each_failing_property() {
    let req = request(json!({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer"},
        "ok": {"type": "boolean"}
    }, "required": ["name", "ok"]}));
    validate_request(&req, &Limits::default()).unwrap();
    let err = validate_response(&req, answer(json!({"age": "x", "zzz": 1}))).unwrap_err();
    assert_eq!(err.kind, ValidationErrorKind::Invalid);
    let names: Vec<&str> = err.fields.keys().map(String::as_str).collect();
    assert_eq!(names, ["age", "name", "ok", "zzz"]);
    assert_eq!(err.field, "fields");
    assert!(validate_response(&req, answer(json!({"name": "n", "ok": true}))).is_ok());
    // The answer of a form is `fields`, nothing else.
    let text: InteractionResponse = InteractionResponse::text("ir_1", "hello");
    assert_eq!(validate_response(&req, text).unwrap_err().field, "fields");
    let mut both = answer(json!({"name": "n", "ok": true}));
    both.value = Some("x".to_owned());
    assert_eq!(validate_response(&req, both).unwrap_err().field, "value");
    // `fields` answers nothing but a form.
    let free = InteractionRequest {
        id: Some("ir_1".to_owned()),
        ..InteractionRequest::new(
            "s-1",
            InteractionKind::FreeText {
                prompt: "q".to_owned(),
            },
        )
    };
    let mut stray: InteractionResponse = InteractionResponse::text("ir_1", "x");
    stray.fields = Some(Map::new());
    assert_eq!(validate_response(&free, stray).unwrap_err().field, "fields");
}

#[test]
fn the_properties_keep_their_order_through_a_round_trip() {
    let text = r#"{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"},"mid":{"type":"boolean"}}}"#;
    let req_text =
        format!(r#"{{"session_id":"s","kind":{{"type":"form","prompt":"p","schema":{text}}}}}"#);
    let req: InteractionRequest = serde_json::from_str(&req_text).unwrap();
    let InteractionKind::Form { schema, .. } = &req.kind else {
        panic!("a form")
    };
    let names: Vec<&str> = schema
        .properties
        .0
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["zeta", "alpha", "mid"]);
    let again = serde_json::to_string(&req).unwrap();
    assert!(
        again.find("zeta").unwrap() < again.find("alpha").unwrap(),
        "{again}"
    );
    // Through the flattened stored interaction too.
    let stored = format!(
        r#"{{"id":"ir_1","session_id":"s","kind":{{"type":"form","prompt":"p","schema":{text}}},"status":"pending","created_at":"2026-01-01T00:00:00Z"}}"#
    );
    let i: lev_protocol::Interaction = serde_json::from_str(&stored).unwrap();
    let InteractionKind::Form { schema, .. } = &i.request.kind else {
        panic!("a form")
    };
    assert_eq!(schema.properties.0[0].0, "zeta");
}

/// The largest schema and answer the limits allow are checked well within
/// a linear budget: twice the input, at most about twice the time.
#[test]
fn the_limits_hold_and_are_checked_in_linear_time() {
    let limits = Limits::default();
    let big_enum: Vec<String> = (0..limits.options).map(|i| format!("{i:0>16}")).collect();
    let mut props = Vec::new();
    for i in 0..lev_protocol::form::FORM_FIELDS_MAX {
        props.push((
            format!("f{i}"),
            if i % 2 == 0 {
                json!({"type": "string", "enum": big_enum})
            } else {
                json!({"type": "string", "maxLength": 100_000})
            },
        ));
    }
    let too_many = FormSchema {
        properties: FormProperties(
            (0..=lev_protocol::form::FORM_FIELDS_MAX)
                .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
                .collect(),
        ),
        ..FormSchema::new(Vec::new(), &[])
    };
    let err = parse_schema(&too_many, &limits).unwrap_err();
    assert_eq!(err.field, "kind.schema.properties");
    let huge = FormSchema::new(
        vec![(
            "f".to_owned(),
            json!({"type": "string", "description": "x".repeat(limits.prompt_bytes)}),
        )],
        &[],
    );
    assert_eq!(
        parse_schema(&huge, &limits).unwrap_err().kind,
        ValidationErrorKind::TooLarge
    );

    let form = parse_schema(&FormSchema::new(props, &[]), &limits).unwrap();
    let answer_of = |len: usize| -> Map<String, Value> {
        form.fields
            .iter()
            .map(|f| {
                let v = match &f.ty {
                    FieldType::Enum { values, .. } => json!(values[values.len() - 1]),
                    _ => json!("é".repeat(len)),
                };
                (f.name.clone(), v)
            })
            .collect()
    };
    // Too long an answer is refused, by byte count, with the field named.
    let over = answer_of(lev_protocol::validate::ANSWER_TEXT_BYTES);
    let errors = check_answer(&form, &over).unwrap_err();
    assert!(errors.contains_key("f1"), "{errors:?}");
    let time = |len: usize| {
        let answer = answer_of(len);
        let start = Instant::now();
        for _ in 0..5 {
            check_answer(&form, &answer).unwrap();
        }
        start.elapsed()
    };
    let small = time(8 * 1024).max(Duration::from_micros(200));
    let large = time(16 * 1024);
    assert!(
        large < small * 6,
        "twice the input took {large:?} against {small:?}"
    );
}

proptest! {
    #[test]
    fn integer_bounds_hold(lo in -1000i64..1000, span in 0i64..1000, v in -3000i64..3000) {
        let hi = lo + span;
        let f = field(json!({"type": "integer", "minimum": lo, "maximum": hi}));
        prop_assert_eq!(check_value(&f, &json!(v)).is_ok(), lo <= v && v <= hi);
        let typed = value_from_text(&f, &v.to_string()).unwrap();
        prop_assert_eq!(typed, json!(v));
    }

    #[test]
    fn string_lengths_count_characters(s in "\\PC{0,12}", lo in 0u64..8, span in 0u64..8) {
        let hi = lo + span;
        let f = field(json!({"type": "string", "minLength": lo, "maxLength": hi}));
        let n = s.chars().count() as u64;
        prop_assert_eq!(check_value(&f, &json!(s)).is_ok(), lo <= n && n <= hi);
    }

    #[test]
    fn dates_are_real_days(y in 0i32..10000, m in 0u8..14, d in 0u8..33) {
        let text = format!("{y:04}-{m:02}-{d:02}");
        let real = time::Month::try_from(m)
            .ok()
            .and_then(|m| time::Date::from_calendar_date(y, m, d).ok())
            .is_some();
        let f = field(json!({"type": "string", "format": "date"}));
        prop_assert_eq!(check_value(&f, &json!(text)).is_ok(), real);
    }

    #[test]
    fn property_order_survives(names in proptest::collection::btree_set("[a-z]{1,8}", 1..20)) {
        let mut names: Vec<String> = names.into_iter().collect();
        names.reverse();
        let props: Vec<(String, Value)> =
            names.iter().map(|n| (n.clone(), json!({"type": "boolean"}))).collect();
        let schema = FormSchema::new(props, &[]);
        let text = serde_json::to_string(&schema).unwrap();
        let back: FormSchema = serde_json::from_str(&text).unwrap();
        let order: Vec<String> = back.properties.0.iter().map(|(n, _)| n.clone()).collect();
        prop_assert_eq!(order, names);
        prop_assert!(parse_schema(&back, &Limits::default()).is_ok());
    }
}
