//! Validation of a gate call (`POST /v1/gate`, SPEC section 6, steps 0 and
//! 1, and the rules of sections 1 and 9), beside the validation of the other
//! requests in [`crate::validate`]. Every error names the field at fault.

use serde_json::Value;

use crate::api::GateRequest;
use crate::validate::{
    Limits, ValidationError, ValidationErrorKind, check_args_json, check_capabilities, check_id,
    check_reason, check_tool_name,
};

/// The most entries of a gate call's `route`.
pub const MAX_ROUTE: usize = 8;

fn invalid(field: &str, message: impl Into<String>) -> ValidationError {
    ValidationError {
        field: field.to_owned(),
        kind: ValidationErrorKind::Invalid,
        message: message.into(),
        fields: std::collections::BTreeMap::new(),
    }
}

/// An optional identifier: empty, or [`check_id`]'s.
fn check_opt_id(field: &str, value: &str) -> Result<(), ValidationError> {
    if value.is_empty() {
        Ok(())
    } else {
        check_id(field, value)
    }
}

/// Check a gate call acting for `caller` (the caller the token acts for,
/// empty for none), field by field in the order of the request, and return
/// its args parsed. The session's id is checked first, so a server may
/// check it (and whether the token may name it) before anything else.
///
/// # Errors
/// The first field at fault: 413 for one over its size limit, 422 for any
/// other mistake.
pub fn validate_gate_request(
    req: &GateRequest,
    caller: &str,
    limits: &Limits,
) -> Result<Value, ValidationError> {
    check_id("session_id", &req.session_id)?;
    check_id("request_id", &req.request_id)?;
    check_opt_id("conversation_id", &req.conversation_id)?;
    check_opt_id("turn_id", &req.turn_id)?;
    check_opt_id("caller", caller)?;
    check_opt_id("sandbox_mode", &req.sandbox_mode)?;
    check_tool_name("tool_name", &req.tool_name)?;
    check_args_json("args_json", &req.args_json, limits)?;
    check_capabilities("required_capabilities", &req.required_capabilities)?;
    check_reason("reason", req.reason.as_deref())?;
    if req.timeout_s == Some(0) {
        return Err(invalid("timeout_s", "expected at least 1 second, found 0"));
    }
    if let Some(route) = &req.route {
        if route.is_empty() || route.len() > MAX_ROUTE {
            return Err(invalid(
                "route",
                format!("expected 1 to {MAX_ROUTE} entries, found {}", route.len()),
            ));
        }
        for (i, r) in route.iter().enumerate() {
            check_id(&format!("route[{i}]"), r)?;
        }
    }
    serde_json::from_str(&req.args_json)
        .map_err(|e| invalid("args_json", format!("expected JSON text, {e}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn request() -> GateRequest {
        serde_json::from_value(serde_json::json!({
            "session_id": "s1",
            "request_id": "r1",
            "tool_name": "Bash",
            "args_json": "{\"command\":\"ls\"}",
        }))
        .unwrap()
    }

    #[test]
    fn a_good_call_gives_its_args() {
        let args = validate_gate_request(&request(), "", &Limits::default()).unwrap();
        assert_eq!(args["command"], "ls");
    }

    #[test]
    fn each_mistake_names_its_field() {
        let limits = Limits::default();
        let mut req = request();
        req.timeout_s = Some(0);
        let e = validate_gate_request(&req, "", &limits).unwrap_err();
        assert_eq!(
            e.to_string(),
            "timeout_s: expected at least 1 second, found 0"
        );
        let mut req = request();
        req.route = Some(Vec::new());
        let e = validate_gate_request(&req, "", &limits).unwrap_err();
        assert_eq!(e.to_string(), "route: expected 1 to 8 entries, found 0");
        let mut req = request();
        req.route = Some(vec!["operator".into(), "bad id".into()]);
        assert_eq!(
            validate_gate_request(&req, "", &limits).unwrap_err().field,
            "route[1]"
        );
        let e = validate_gate_request(&request(), "bad caller", &limits).unwrap_err();
        assert_eq!(e.field, "caller");
    }
}
