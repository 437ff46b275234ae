//! Property tests of grant matching and of the gate's decision with grants
//! (SPEC sections 5 and 6): a grant covers a call exactly when every part of
//! its key agrees, its args patterns narrow and never widen, and no grant
//! turns a deny rule into an allow.

use std::collections::{BTreeMap, BTreeSet};

use lev_approval::policy::{GateCall, GateVerdict, Policy, decide};
use lev_approval::{ArgsMatcher, GrantMatch, GrantRule};
use proptest::prelude::*;
use serde_json::json;

const CAPS: [&str; 5] = ["fs-read", "fs-write", "net", "proc-exec", "gpu"];

fn caps() -> impl Strategy<Value = BTreeSet<String>> {
    proptest::sample::subsequence(CAPS.to_vec(), 0..=CAPS.len())
        .prop_map(|c| c.into_iter().map(str::to_owned).collect())
}

/// Small alphabets, so that equal and different values both come up often.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![Just("a"), Just("b"), Just("")].prop_map(str::to_owned)
}

fn program() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("ls".to_owned()),
        Just("git".to_owned()),
        Just("rm".to_owned()),
        "[a-z.*+?()|\\[\\]^$ -]{0,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn a_grant_covers_a_call_exactly_when_its_whole_key_agrees(
        (g_caller, c_caller) in (name(), name()),
        (g_conv, c_conv) in (proptest::option::of(name()), name()),
        (g_mode, c_mode) in (name(), name()),
        (g_tool, c_tool) in (name(), name()),
        covered in caps(),
        shortfall in caps(),
        narrowed_to in proptest::option::of(program()),
        argv0 in program(),
    ) {
        let args = narrowed_to.as_ref().map(|p| {
            ArgsMatcher::compile(&BTreeMap::from([(
                "/argv/0".to_owned(),
                format!("^{}$", regex::escape(p)),
            )]))
            .unwrap()
        });
        let grant = GrantRule {
            caller: g_caller.clone(),
            conversation_id: g_conv.clone(),
            sandbox_mode: g_mode.clone(),
            tool_name: g_tool.clone(),
            covered_capabilities: covered.clone(),
            args,
        };
        let call_args = json!({"argv": [argv0], "cwd": "/"});
        let call = GrantMatch {
            caller: &c_caller,
            conversation_id: &c_conv,
            sandbox_mode: &c_mode,
            tool_name: &c_tool,
            shortfall: &shortfall,
            args: &call_args,
        };
        let expected = g_caller == c_caller
            && g_conv.as_ref().is_none_or(|c| *c == c_conv)
            && g_mode == c_mode
            && g_tool == c_tool
            && shortfall.is_subset(&covered)
            && narrowed_to.as_ref().is_none_or(|p| *p == argv0);
        prop_assert_eq!(grant.covers(&call), expected);
    }

    #[test]
    fn grant_args_only_narrow(
        argv0 in program(),
        pattern_for in program(),
        pointer in prop_oneof![Just("/argv/0"), Just("/argv/1"), Just("/missing"), Just("/cwd")],
    ) {
        let narrowed = ArgsMatcher::compile(&BTreeMap::from([(
            pointer.to_owned(),
            format!("^{}$", regex::escape(&pattern_for)),
        )]))
        .unwrap();
        let args = json!({"argv": [argv0], "cwd": "/w"});
        let base = GrantRule {
            caller: "a".into(),
            conversation_id: None,
            sandbox_mode: "m".into(),
            tool_name: "shell".into(),
            covered_capabilities: BTreeSet::new(),
            args: None,
        };
        let with_args = GrantRule { args: Some(narrowed), ..base.clone() };
        let none = BTreeSet::new();
        let call = GrantMatch {
            caller: "a",
            conversation_id: "c",
            sandbox_mode: "m",
            tool_name: "shell",
            shortfall: &none,
            args: &args,
        };
        // Narrowing never covers what the plain grant does not.
        prop_assert!(!with_args.covers(&call) || base.covers(&call));
        // A pointer that does not resolve covers nothing.
        if pointer == "/argv/1" || pointer == "/missing" {
            prop_assert!(!with_args.covers(&call));
        }
        if pointer == "/argv/0" {
            prop_assert_eq!(with_args.covers(&call), argv0 == pattern_for);
        }
    }

    #[test]
    fn no_grant_turns_a_deny_rule_into_an_allow(
        covered in caps(),
        required in caps(),
        mode in prop_oneof![Just("read-only"), Just("workspace-write"), Just("danger-full-access")],
        argv0 in prop_oneof![Just("rm"), Just("dd")],
    ) {
        let policy = Policy::parse(
            "[sandbox_modes]\n\"read-only\" = [\"fs-read\"]\n\"workspace-write\" = [\"fs-read\", \"fs-write\"]\n\
             \"danger-full-access\" = [\"*\"]\n\n[[rule]]\ntool = \"shell\"\nargs = { \"/argv/0\" = \"^(rm|dd)$\" }\n\
             decision = \"deny\"\nreason = \"no\"\n",
        )
        .unwrap();
        let grant = GrantRule {
            caller: "a".into(),
            conversation_id: Some("c".into()),
            sandbox_mode: mode.to_owned(),
            tool_name: "shell".into(),
            covered_capabilities: covered,
            args: None,
        };
        let args = json!({"argv": [argv0]});
        let required: Vec<String> = required.into_iter().collect();
        let call = GateCall {
            caller: "a",
            conversation_id: "c",
            sandbox_mode: mode,
            tool_name: "shell",
            args: &args,
            required_capabilities: &required,
        };
        let is_deny = matches!(decide(&policy, &call, &[grant]).verdict, GateVerdict::Deny { .. });
        prop_assert!(is_deny);
    }

    #[test]
    fn a_grant_decides_only_what_would_otherwise_ask(
        covered in caps(),
        required in caps(),
        mode in prop_oneof![Just("read-only"), Just("workspace-write"), Just("unknown")],
    ) {
        let policy = Policy::parse(
            "[sandbox_modes]\n\"read-only\" = [\"fs-read\"]\n\"workspace-write\" = [\"fs-read\", \"fs-write\"]\n",
        )
        .unwrap();
        let args = json!({});
        let required: Vec<String> = required.into_iter().collect();
        let call = GateCall {
            caller: "a",
            conversation_id: "c",
            sandbox_mode: mode,
            tool_name: "t",
            args: &args,
            required_capabilities: &required,
        };
        let grant = GrantRule {
            caller: "a".into(),
            conversation_id: None,
            sandbox_mode: mode.to_owned(),
            tool_name: "t".into(),
            covered_capabilities: covered.clone(),
            args: None,
        };
        let without = decide(&policy, &call, &[]).verdict;
        let with = decide(&policy, &call, std::slice::from_ref(&grant)).verdict;
        match (&without, &with) {
            (GateVerdict::Ask { shortfall, .. }, GateVerdict::AllowByGrant { grant: 0, shortfall: s }) => {
                prop_assert_eq!(shortfall, s);
                prop_assert!(shortfall.is_subset(&covered));
            }
            (GateVerdict::Ask { shortfall, .. }, GateVerdict::Ask { .. }) => {
                prop_assert!(!shortfall.is_subset(&covered));
            }
            (a, b) => prop_assert_eq!(a, b, "a grant changed a decision that did not ask"),
        }
    }
}
