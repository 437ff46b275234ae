//! The `form` kind's schema: the flat JSON Schema subset MCP elicitation
//! allows, checked when a form is asked ([`parse_schema`]), and the answer
//! checked against it ([`check_answer`]).
//!
//! The subset: an object (`type: "object"`, optional `title`, `description`,
//! `$schema`, `additionalProperties: false`) of 1 to [`FORM_FIELDS_MAX`]
//! `properties`, each of type `string`, `number`, `integer` or `boolean`,
//! with `title`, `description` and `default`; a string may have `minLength`,
//! `maxLength`, a `format` (`email`, `uri`, `date`, `date-time`) or an `enum`
//! of strings (with `enumNames`); a number or integer `minimum` and
//! `maximum`; the object a `required` list. Any other keyword is refused,
//! named. Every check is linear in the schema's and the answer's size.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::ids::is_valid_id;
use crate::validate::{ANSWER_TEXT_BYTES, Limits, ValidationError, ValidationErrorKind};

/// Most fields of one form.
pub const FORM_FIELDS_MAX: usize = 64;

/// A form's JSON Schema as sent: `properties` in the order the asker wrote
/// them (the order the form shows them in), every other keyword beside it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FormSchema {
    /// The fields, in order: name and that field's schema.
    #[serde(default)]
    pub properties: FormProperties,
    /// Every other keyword of the object (`type`, `required`, `title`, ...).
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A JSON object's entries in the order they were written (a repeated name
/// is refused).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FormProperties(pub Vec<(String, Value)>);

impl Serialize for FormProperties {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for FormProperties {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Ordered;
        impl<'de> Visitor<'de> for Ordered {
            type Value = FormProperties;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of property schemas")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut seen = BTreeSet::new();
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    if !seen.insert(k.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "property {k:?} is named twice"
                        )));
                    }
                    out.push((k, v));
                }
                Ok(FormProperties(out))
            }
        }
        d.deserialize_map(Ordered)
    }
}

impl FormSchema {
    /// A schema of `fields` (name, property schema), `required` naming the
    /// ones that must be answered.
    pub fn new(fields: Vec<(String, Value)>, required: &[&str]) -> Self {
        let mut other = BTreeMap::new();
        other.insert("type".to_owned(), Value::String("object".to_owned()));
        if !required.is_empty() {
            other.insert(
                "required".to_owned(),
                Value::Array(required.iter().map(|r| Value::from(*r)).collect()),
            );
        }
        Self {
            properties: FormProperties(fields),
            other,
        }
    }

    /// The schema as one JSON value (`properties` in name order).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A checked form: its fields in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    /// The form's own title, if it has one.
    pub title: Option<String>,
    /// The fields, in the order they are shown.
    pub fields: Vec<Field>,
}

/// One field of a [`Form`].
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The property's name: the answer's key.
    pub name: String,
    /// Its label; the name when absent.
    pub title: Option<String>,
    /// Help text.
    pub description: Option<String>,
    /// Whether the answer must hold it.
    pub required: bool,
    /// What it accepts.
    pub ty: FieldType,
    /// The value to start from, already checked against the field.
    pub default: Option<Value>,
}

impl Field {
    /// The label to show: the title, else the name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }
}

/// A string's `format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringFormat {
    /// An address as HTML's `input type=email` accepts it.
    Email,
    /// An absolute URI (a scheme, then no space or control character).
    Uri,
    /// `YYYY-MM-DD`, a real day.
    Date,
    /// An RFC 3339 date and time with its offset.
    DateTime,
}

impl StringFormat {
    /// The keyword's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Email => "email",
            Self::Uri => "uri",
            Self::Date => "date",
            Self::DateTime => "date-time",
        }
    }

    /// What a value of this format is, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Email => "an email address",
            Self::Uri => "an absolute URI",
            Self::Date => "a date (YYYY-MM-DD)",
            Self::DateTime => "an RFC 3339 date-time",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "email" => Self::Email,
            "uri" => Self::Uri,
            "date" => Self::Date,
            "date-time" => Self::DateTime,
            _ => return None,
        })
    }

    /// Whether `s` is written in this format.
    pub fn accepts(self, s: &str) -> bool {
        match self {
            Self::Email => is_email(s),
            Self::Uri => is_uri(s),
            Self::Date => is_date(s),
            Self::DateTime => is_date_time(s),
        }
    }
}

/// What a field accepts.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldType {
    /// Text, within its length (in characters) and format.
    String {
        /// Fewest characters.
        min_length: Option<u64>,
        /// Most characters.
        max_length: Option<u64>,
        /// The format it must be written in.
        format: Option<StringFormat>,
    },
    /// One of these strings (`enum`), each shown with its `enumNames` label.
    Enum {
        /// The values.
        values: Vec<String>,
        /// Their labels, as many as the values, when given.
        names: Option<Vec<String>>,
    },
    /// A number (`integer`: a whole one) within its bounds.
    Number {
        /// Whole numbers only.
        integer: bool,
        /// Least value.
        minimum: Option<f64>,
        /// Greatest value.
        maximum: Option<f64>,
    },
    /// True or false.
    Boolean,
}

impl FieldType {
    /// The JSON Schema `type` of the field.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::String { .. } | Self::Enum { .. } => "string",
            Self::Number { integer: true, .. } => "integer",
            Self::Number { .. } => "number",
            Self::Boolean => "boolean",
        }
    }
}

fn invalid(field: &str, message: impl Into<String>) -> ValidationError {
    ValidationError {
        field: field.to_owned(),
        kind: ValidationErrorKind::Invalid,
        message: message.into(),
        fields: BTreeMap::new(),
    }
}

fn outside(path: &str, keyword: &str) -> ValidationError {
    invalid(
        &format!("{path}.{keyword}"),
        format!(
            "keyword {keyword:?} is outside the form schema subset (MCP elicitation's flat \
             schema: string, number, integer, boolean and enum properties)"
        ),
    )
}

/// Check a form's schema against the subset and read it.
///
/// # Errors
/// 413 past [`Limits::prompt_bytes`] serialised; 422 naming the first
/// keyword outside the subset, a keyword that does not apply to its
/// property's type, a bad value of a keyword, or a default its own field
/// refuses.
pub fn parse_schema(schema: &FormSchema, limits: &Limits) -> Result<Form, ValidationError> {
    const PATH: &str = "kind.schema";
    let size = serde_json::to_string(schema).map_or(usize::MAX, |s| s.len());
    if size > limits.prompt_bytes {
        return Err(ValidationError {
            field: PATH.to_owned(),
            kind: ValidationErrorKind::TooLarge,
            message: format!(
                "at most {} bytes allowed, found {size}",
                limits.prompt_bytes
            ),
            fields: BTreeMap::new(),
        });
    }
    let mut title = None;
    let mut required: Vec<String> = Vec::new();
    let mut has_type = false;
    for (keyword, value) in &schema.other {
        let at = format!("{PATH}.{keyword}");
        match keyword.as_str() {
            "type" => {
                if value != "object" {
                    return Err(invalid(&at, format!("expected \"object\", found {value}")));
                }
                has_type = true;
            }
            "title" => title = Some(text(&at, value, limits.option_bytes)?),
            "description" => {
                text(&at, value, limits.prompt_bytes)?;
            }
            "$schema" => {
                text(&at, value, limits.option_bytes)?;
            }
            "additionalProperties" => {
                if value != &Value::Bool(false) {
                    return Err(invalid(
                        &at,
                        "only false is in the subset (a form has exactly its properties)",
                    ));
                }
            }
            "required" => {
                let Value::Array(names) = value else {
                    return Err(invalid(&at, "expected an array of property names"));
                };
                for (i, name) in names.iter().enumerate() {
                    let Value::String(name) = name else {
                        return Err(invalid(&format!("{at}[{i}]"), "expected a property name"));
                    };
                    required.push(name.clone());
                }
            }
            _ => return Err(outside(PATH, keyword)),
        }
    }
    if !has_type {
        return Err(invalid(
            &format!("{PATH}.type"),
            "required: a form's schema is {\"type\": \"object\", \"properties\": {...}}",
        ));
    }
    let props = &schema.properties.0;
    if props.is_empty() || props.len() > FORM_FIELDS_MAX {
        return Err(invalid(
            &format!("{PATH}.properties"),
            format!(
                "expected 1 to {FORM_FIELDS_MAX} properties, found {}",
                props.len()
            ),
        ));
    }
    let names: BTreeSet<&str> = props.iter().map(|(n, _)| n.as_str()).collect();
    let mut seen_required = BTreeSet::new();
    for (i, name) in required.iter().enumerate() {
        let at = format!("{PATH}.required[{i}]");
        if !names.contains(name.as_str()) {
            return Err(invalid(
                &at,
                format!("{name:?} is not one of the properties"),
            ));
        }
        if !seen_required.insert(name.as_str()) {
            return Err(invalid(&at, format!("{name:?} is listed twice")));
        }
    }
    let mut fields = Vec::with_capacity(props.len());
    for (name, prop) in props {
        let at = format!("{PATH}.properties.{name}");
        if !is_valid_id(name) {
            return Err(invalid(
                &format!("{PATH}.properties"),
                format!(
                    "a property name is 1 to 128 characters of A-Z a-z 0-9 . _ : -, found {:?}",
                    name.chars().take(64).collect::<String>()
                ),
            ));
        }
        fields.push(parse_field(
            &at,
            name,
            prop,
            seen_required.contains(name.as_str()),
            limits,
        )?);
    }
    Ok(Form { title, fields })
}

fn text(at: &str, value: &Value, limit: usize) -> Result<String, ValidationError> {
    let Value::String(s) = value else {
        return Err(invalid(
            at,
            format!("expected a string, found {}", json_type(value)),
        ));
    };
    if s.len() > limit {
        return Err(ValidationError {
            field: at.to_owned(),
            kind: ValidationErrorKind::TooLarge,
            message: format!("at most {limit} bytes allowed, found {}", s.len()),
            fields: BTreeMap::new(),
        });
    }
    Ok(s.clone())
}

fn count(at: &str, value: &Value) -> Result<u64, ValidationError> {
    value
        .as_u64()
        .ok_or_else(|| invalid(at, format!("expected a whole number >= 0, found {value}")))
}

fn bound(at: &str, value: &Value) -> Result<f64, ValidationError> {
    value
        .as_f64()
        .filter(|f| f.is_finite())
        .ok_or_else(|| invalid(at, format!("expected a number, found {value}")))
}

/// The keywords each property type allows.
fn allowed(ty: &str) -> &'static [&'static str] {
    match ty {
        "string" => &[
            "type",
            "title",
            "description",
            "default",
            "minLength",
            "maxLength",
            "format",
            "enum",
            "enumNames",
        ],
        "number" | "integer" => &[
            "type",
            "title",
            "description",
            "default",
            "minimum",
            "maximum",
        ],
        _ => &["type", "title", "description", "default"],
    }
}

/// Every keyword of the subset, whatever the type.
const KNOWN: [&str; 11] = [
    "type",
    "title",
    "description",
    "default",
    "minLength",
    "maxLength",
    "format",
    "enum",
    "enumNames",
    "minimum",
    "maximum",
];

fn parse_field(
    at: &str,
    name: &str,
    prop: &Value,
    required: bool,
    limits: &Limits,
) -> Result<Field, ValidationError> {
    let Value::Object(prop) = prop else {
        return Err(invalid(at, "expected a property schema (an object)"));
    };
    let ty = match prop.get("type") {
        Some(Value::String(t))
            if ["string", "number", "integer", "boolean"].contains(&t.as_str()) =>
        {
            t.as_str()
        }
        Some(other) => {
            return Err(invalid(
                &format!("{at}.type"),
                format!(
                    "expected \"string\", \"number\", \"integer\" or \"boolean\" (the form subset \
                     has no objects or arrays), found {other}"
                ),
            ));
        }
        None => {
            return Err(invalid(&format!("{at}.type"), "required, found nothing"));
        }
    };
    let allowed = allowed(ty);
    for keyword in prop.keys() {
        if !KNOWN.contains(&keyword.as_str()) {
            return Err(outside(at, keyword));
        }
        if !allowed.contains(&keyword.as_str()) {
            return Err(invalid(
                &format!("{at}.{keyword}"),
                format!("keyword {keyword:?} does not apply to a {ty} property"),
            ));
        }
    }
    let get_text = |k: &str, limit: usize| -> Result<Option<String>, ValidationError> {
        prop.get(k)
            .map(|v| text(&format!("{at}.{k}"), v, limit))
            .transpose()
    };
    let title = get_text("title", limits.option_bytes)?;
    let description = get_text("description", limits.prompt_bytes)?;
    let field_ty = match ty {
        "string" => string_type(at, prop, limits)?,
        "boolean" => FieldType::Boolean,
        _ => {
            let minimum = prop
                .get("minimum")
                .map(|v| bound(&format!("{at}.minimum"), v))
                .transpose()?;
            let maximum = prop
                .get("maximum")
                .map(|v| bound(&format!("{at}.maximum"), v))
                .transpose()?;
            if let (Some(lo), Some(hi)) = (minimum, maximum)
                && lo > hi
            {
                return Err(invalid(
                    &format!("{at}.maximum"),
                    format!("maximum {hi} is below minimum {lo}"),
                ));
            }
            FieldType::Number {
                integer: ty == "integer",
                minimum,
                maximum,
            }
        }
    };
    let mut field = Field {
        name: name.to_owned(),
        title,
        description,
        required,
        ty: field_ty,
        default: None,
    };
    if let Some(default) = prop.get("default") {
        if let Err(why) = check_value(&field, default) {
            return Err(invalid(&format!("{at}.default"), why));
        }
        field.default = Some(default.clone());
    }
    Ok(field)
}

fn string_type(
    at: &str,
    prop: &Map<String, Value>,
    limits: &Limits,
) -> Result<FieldType, ValidationError> {
    if let Some(values) = prop.get("enum") {
        for k in ["minLength", "maxLength", "format"] {
            if prop.contains_key(k) {
                return Err(invalid(
                    &format!("{at}.{k}"),
                    "does not go with \"enum\" (an enum's values are its only answers)",
                ));
            }
        }
        let values = enum_strings(&format!("{at}.enum"), values, limits)?;
        let names = prop
            .get("enumNames")
            .map(|n| enum_strings(&format!("{at}.enumNames"), n, limits))
            .transpose()?;
        if let Some(names) = &names
            && names.len() != values.len()
        {
            return Err(invalid(
                &format!("{at}.enumNames"),
                format!(
                    "expected {} names (one per enum value), found {}",
                    values.len(),
                    names.len()
                ),
            ));
        }
        let mut seen = BTreeSet::new();
        if let Some(dup) = values.iter().find(|v| !seen.insert(v.as_str())) {
            return Err(invalid(
                &format!("{at}.enum"),
                format!("{dup:?} is listed twice"),
            ));
        }
        return Ok(FieldType::Enum { values, names });
    }
    if prop.contains_key("enumNames") {
        return Err(invalid(
            &format!("{at}.enumNames"),
            "goes with \"enum\" only",
        ));
    }
    let min_length = prop
        .get("minLength")
        .map(|v| count(&format!("{at}.minLength"), v))
        .transpose()?;
    let max_length = prop
        .get("maxLength")
        .map(|v| count(&format!("{at}.maxLength"), v))
        .transpose()?;
    if let (Some(lo), Some(hi)) = (min_length, max_length)
        && lo > hi
    {
        return Err(invalid(
            &format!("{at}.maxLength"),
            format!("maxLength {hi} is below minLength {lo}"),
        ));
    }
    let format = match prop.get("format") {
        None => None,
        Some(Value::String(f)) => Some(StringFormat::parse(f).ok_or_else(|| {
            invalid(
                &format!("{at}.format"),
                format!(
                    "expected \"email\", \"uri\", \"date\" or \"date-time\", found {:?}",
                    f.chars().take(64).collect::<String>()
                ),
            )
        })?),
        Some(other) => {
            return Err(invalid(
                &format!("{at}.format"),
                format!("expected a string, found {}", json_type(other)),
            ));
        }
    };
    Ok(FieldType::String {
        min_length,
        max_length,
        format,
    })
}

fn enum_strings(at: &str, value: &Value, limits: &Limits) -> Result<Vec<String>, ValidationError> {
    let Value::Array(items) = value else {
        return Err(invalid(at, "expected an array of strings"));
    };
    if items.is_empty() || items.len() > limits.options {
        return Err(invalid(
            at,
            format!(
                "expected 1 to {} values, found {}",
                limits.options,
                items.len()
            ),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| text(&format!("{at}[{i}]"), v, limits.option_bytes))
        .collect()
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Check one value against its field.
///
/// # Errors
/// Why the field refuses it, for a person.
pub fn check_value(field: &Field, value: &Value) -> Result<(), String> {
    match &field.ty {
        FieldType::String {
            min_length,
            max_length,
            format,
        } => {
            let Value::String(s) = value else {
                return Err(format!("expected a string, found {}", json_type(value)));
            };
            if s.len() > ANSWER_TEXT_BYTES {
                return Err(format!(
                    "at most {ANSWER_TEXT_BYTES} bytes allowed, found {}",
                    s.len()
                ));
            }
            let chars = s.chars().count() as u64;
            if let Some(lo) = min_length
                && chars < *lo
            {
                return Err(format!("at least {lo} characters, found {chars}"));
            }
            if let Some(hi) = max_length
                && chars > *hi
            {
                return Err(format!("at most {hi} characters, found {chars}"));
            }
            if let Some(f) = format
                && !f.accepts(s)
            {
                return Err(format!("expected {}, found {:?}", f.describe(), short(s)));
            }
            Ok(())
        }
        FieldType::Enum { values, .. } => {
            let Value::String(s) = value else {
                return Err(format!("expected a string, found {}", json_type(value)));
            };
            if values.iter().any(|v| v == s) {
                Ok(())
            } else {
                Err(format!(
                    "expected one of {}, found {:?}",
                    values
                        .iter()
                        .map(|v| format!("{v:?}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    short(s)
                ))
            }
        }
        FieldType::Number {
            integer,
            minimum,
            maximum,
        } => {
            let Value::Number(n) = value else {
                return Err(format!(
                    "expected {}, found {}",
                    if *integer { "an integer" } else { "a number" },
                    json_type(value)
                ));
            };
            let f = n.as_f64().unwrap_or(f64::NAN);
            let whole = n.is_i64() || n.is_u64() || (f.is_finite() && f.fract() == 0.0);
            if *integer && !whole {
                return Err(format!("expected an integer, found {n}"));
            }
            if let Some(lo) = minimum
                && f < *lo
            {
                return Err(format!("at least {lo}, found {n}"));
            }
            if let Some(hi) = maximum
                && f > *hi
            {
                return Err(format!("at most {hi}, found {n}"));
            }
            Ok(())
        }
        FieldType::Boolean => match value {
            Value::Bool(_) => Ok(()),
            other => Err(format!(
                "expected true or false, found {}",
                json_type(other)
            )),
        },
    }
}

fn short(s: &str) -> String {
    let mut t: String = s.chars().take(64).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t
}

/// Check an answer against its form: every key a field, every required field
/// there, every value accepted by its field.
///
/// # Errors
/// Each failing property by name, with why (an unknown key too).
pub fn check_answer(
    form: &Form,
    answer: &Map<String, Value>,
) -> Result<(), BTreeMap<String, String>> {
    let mut errors = BTreeMap::new();
    for key in answer.keys() {
        if !form.fields.iter().any(|f| &f.name == key) {
            errors.insert(short(key), "not a field of this form".to_owned());
        }
    }
    for field in &form.fields {
        match answer.get(&field.name) {
            None if field.required => {
                errors.insert(field.name.clone(), "required, found nothing".to_owned());
            }
            None => {}
            Some(value) => {
                if let Err(why) = check_value(field, value) {
                    errors.insert(field.name.clone(), why);
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Read a person's typed text for `field` as its JSON value: a number for a
/// number, `true`/`false` (or yes/no, y/n, 1/0) for a boolean, an enum's
/// value or its label for an enum, the text itself for a string. The
/// server checks the rest.
///
/// # Errors
/// Text that is not a number, a boolean or one of the enum's values or labels.
pub fn value_from_text(field: &Field, text: &str) -> Result<Value, String> {
    match &field.ty {
        FieldType::String { .. } => Ok(Value::String(text.to_owned())),
        FieldType::Enum { values, names } => {
            if values.iter().any(|v| v == text) {
                return Ok(Value::String(text.to_owned()));
            }
            if let Some(i) = names
                .as_ref()
                .and_then(|n| n.iter().position(|n| n == text))
            {
                return Ok(Value::String(values[i].clone()));
            }
            Err(format!(
                "expected one of {}, found {:?}",
                values.join(", "),
                short(text)
            ))
        }
        FieldType::Number { integer: true, .. } => text
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("expected an integer, found {:?}", short(text))),
        FieldType::Number { .. } => text
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(|n| {
                // Whole numbers stay integers on the wire: 3, not 3.0.
                let f = n.as_f64().unwrap_or_default();
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    Value::from(f as i64)
                } else {
                    Value::Number(n)
                }
            })
            .ok_or_else(|| format!("expected a number, found {:?}", short(text))),
        FieldType::Boolean => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "y" | "1" => Ok(Value::Bool(true)),
            "false" | "no" | "n" | "0" => Ok(Value::Bool(false)),
            _ => Err(format!("expected true or false, found {:?}", short(text))),
        },
    }
}

/// HTML's `input type=email` rule: `local@domain`, the local part of
/// letters, digits and ``.!#$%&'*+/=?^_`{|}~-``, the domain dot-separated
/// labels of letters, digits and inner hyphens, each at most 63 long.
fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".!#$%&'*+/=?^_`{|}~-".contains(c));
    local_ok
        && !domain.is_empty()
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// An absolute URI: a scheme (a letter, then letters, digits, `+ - .`), a
/// colon, then at least one character, none of them a space, a control
/// character or one of `< > " { } | \ ^` and backtick.
fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut sc = scheme.chars();
    sc.next().is_some_and(|c| c.is_ascii_alphabetic())
        && sc.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !rest.is_empty()
        && rest
            .chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && !"<>\"{}|\\^`".contains(c))
}

fn digits(s: &str) -> Option<u32> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// `YYYY-MM-DD` with a real month and day.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (digits(&s[0..4]), digits(&s[5..7]), digits(&s[8..10]))
    else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// RFC 3339 `date-time`: a date, `T`, `HH:MM:SS`, optional fraction, `Z` or
/// `+HH:MM`/`-HH:MM`.
fn is_date_time(s: &str) -> bool {
    if s.len() < 20 || !s.is_char_boundary(10) || !is_date(&s[..10]) {
        return false;
    }
    let rest = &s[10..];
    let Some(rest) = rest.strip_prefix(['T', 't']) else {
        return false;
    };
    let b = rest.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(h), Some(mi), Some(se)) = (
        digits(&rest[0..2]),
        digits(&rest[3..5]),
        digits(&rest[6..8]),
    ) else {
        return false;
    };
    if h > 23 || mi > 59 || se > 60 {
        return false;
    }
    let mut tail = &rest[8..];
    if let Some(frac) = tail.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        tail = &frac[n..];
    }
    match tail {
        "Z" | "z" => true,
        _ => {
            let tb = tail.as_bytes();
            tb.len() == 6
                && (tb[0] == b'+' || tb[0] == b'-')
                && tb[3] == b':'
                && digits(&tail[1..3]).is_some_and(|h| h <= 23)
                && digits(&tail[4..6]).is_some_and(|m| m <= 59)
        }
    }
}
