//! Characters that hide or disguise text: the one definition every place that
//! shows agent text uses (the CLI, the dashboard, through a script the server
//! generates from [`HIDDEN`], and any later interface).
//!
//! A character is *hidden* when a person reading it on a screen cannot tell
//! it is there or what it does: control characters (C0, DEL, C1), Unicode's
//! default-ignorable code points (zero-width characters, bidirectional
//! controls, variation selectors, tags, fillers, the soft hyphen, the
//! combining grapheme joiner), every format (`Cf`) character, the line and
//! paragraph separators, and a few blank-looking letters (the Hangul fillers,
//! the Mongolian vowel separator, the Braille blank). Such characters are
//! shown spelled out (`U+E0049`), never raw, and the text that holds them is
//! flagged.
//!
//! Newline and tab are in the table too: an interface that shows text on
//! several lines keeps those two itself.
//!
//! Which texts of an interaction are checked: [`agent_texts`], one list for
//! every interface.

use crate::interaction::{InteractionKind, InteractionRequest};

/// Inclusive ranges of hidden code points, sorted and disjoint.
pub const HIDDEN: &[(u32, u32)] = &[
    (0x0000, 0x001F),   // C0 controls (tab and newline included)
    (0x007F, 0x009F),   // DEL and C1 controls
    (0x00AD, 0x00AD),   // soft hyphen
    (0x034F, 0x034F),   // combining grapheme joiner
    (0x0600, 0x0605),   // Arabic number signs (Cf)
    (0x061C, 0x061C),   // Arabic letter mark
    (0x06DD, 0x06DD),   // Arabic end of ayah (Cf)
    (0x070F, 0x070F),   // Syriac abbreviation mark (Cf)
    (0x0890, 0x0891),   // Arabic pound and piastre marks above (Cf)
    (0x08E2, 0x08E2),   // Arabic disputed end of ayah (Cf)
    (0x115F, 0x1160),   // Hangul choseong and jungseong fillers
    (0x17B4, 0x17B5),   // Khmer inherent vowels
    (0x180B, 0x180F),   // Mongolian variation selectors and vowel separator
    (0x200B, 0x200F),   // zero-width space, non-joiner, joiner; LRM, RLM
    (0x2028, 0x202E),   // line and paragraph separators; bidi embeddings and overrides
    (0x2060, 0x206F),   // word joiner, invisible operators, bidi isolates, deprecated formats
    (0x2800, 0x2800),   // Braille pattern blank
    (0x3164, 0x3164),   // Hangul filler
    (0xFE00, 0xFE0F),   // variation selectors 1-16
    (0xFEFF, 0xFEFF),   // zero-width no-break space, byte-order mark
    (0xFFA0, 0xFFA0),   // halfwidth Hangul filler
    (0xFFF0, 0xFFFB),   // unassigned specials, interlinear annotation controls
    (0x110BD, 0x110BD), // Kaithi number sign (Cf)
    (0x110CD, 0x110CD), // Kaithi number sign above (Cf)
    (0x13430, 0x1343F), // Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3), // shorthand format controls
    (0x1D173, 0x1D17A), // musical symbol format controls
    (0xE0000, 0xE0FFF), // tags (U+E0000-E007F), variation selectors 17-256, reserved
];

/// Whether `c` is hidden or confusable (see the module's documentation).
pub fn is_hidden(c: char) -> bool {
    let cp = u32::from(c);
    // The table is sorted: the last range starting at or before `cp`.
    let i = HIDDEN.partition_point(|&(lo, _)| lo <= cp);
    i > 0 && HIDDEN.get(i - 1).is_some_and(|&(_, hi)| cp <= hi)
}

/// Whether `text` holds a hidden character other than newline and tab.
pub fn has_hidden(text: &str) -> bool {
    text.chars().any(|c| c != '\n' && c != '\t' && is_hidden(c))
}

/// `c` as `U+XXXX` (at least four hex digits, upper case).
pub fn code_point(c: char) -> String {
    format!("U+{:04X}", u32::from(c))
}

/// Every text of `request` an agent wrote (and the gate's note beside it),
/// in the order they are shown: the ones an interface checks with
/// [`has_hidden`] to flag the request, and whose tag characters
/// ([`tag_chars`]) it spells out. The one list `lev watch` and Slack use;
/// the dashboard's script checks every string of the request, these
/// included.
///
/// The session, id, title, caller, conversation and reason; what is asked
/// (the prompt, the options, each point's id and text; a tool call's name,
/// args, sandbox mode, missing capabilities and labelled answers); and the
/// gate's rule tool, rule reason and risk.
pub fn agent_texts(request: &InteractionRequest) -> Vec<&str> {
    let r = request;
    let mut out: Vec<&str> = vec![&r.session_id];
    out.extend(r.id.as_deref());
    out.extend(r.title.as_deref());
    out.extend(r.caller.as_deref());
    out.extend(r.conversation_id.as_deref());
    out.extend(r.reason.as_deref());
    match &r.kind {
        InteractionKind::FreeText { prompt } => out.push(prompt),
        InteractionKind::Form { prompt, schema } => {
            out.push(prompt);
            for v in schema.other.values() {
                push_strings(&mut out, v);
            }
            for (name, prop) in &schema.properties.0 {
                out.push(name);
                push_strings(&mut out, prop);
            }
        }
        InteractionKind::MultipleChoice { prompt, options } => {
            out.push(prompt);
            out.extend(options.iter().map(String::as_str));
        }
        InteractionKind::InteractionPoints { prompt, points } => {
            out.push(prompt);
            for p in points {
                out.push(&p.id);
                out.push(&p.text);
            }
        }
        InteractionKind::ToolApproval {
            tool_name,
            args_json,
            missing_capabilities,
            sandbox_mode,
            options,
        } => {
            out.push(tool_name);
            out.push(args_json);
            out.push(sandbox_mode);
            out.extend(missing_capabilities.iter().map(String::as_str));
            out.extend(options.iter().map(String::as_str));
        }
    }
    if let Some(g) = &r.gate {
        out.extend(g.rule_tool.as_deref());
        out.extend(g.rule_reason.as_deref());
        out.extend(g.risk.as_deref());
    }
    out
}

/// Every string in a form schema's value (one level of object and array
/// deep, the most a property of the subset holds).
fn push_strings<'a>(out: &mut Vec<&'a str>, v: &'a serde_json::Value) {
    match v {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(items) => {
            out.extend(items.iter().filter_map(serde_json::Value::as_str));
        }
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k);
                match v {
                    serde_json::Value::String(s) => out.push(s),
                    serde_json::Value::Array(items) => {
                        out.extend(items.iter().filter_map(serde_json::Value::as_str));
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The ASCII that `text`'s tag characters (U+E0020 to U+E007E) spell, in
/// order: the way hidden instructions are smuggled past a reader, shown
/// beside the hidden-character flag.
pub fn tag_chars(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().filter_map(|c| {
        let cp = u32::from(c);
        (0xE0020..=0xE007E)
            .contains(&cp)
            .then(|| char::from_u32(cp - 0xE0000))
            .flatten()
    })
}

/// [`HIDDEN`] as a JSON array of `[first, last]` pairs, for the dashboard.
pub fn hidden_ranges_json() -> String {
    let pairs: Vec<String> = HIDDEN
        .iter()
        .map(|(lo, hi)| format!("[{lo},{hi}]"))
        .collect();
    format!("[{}]", pairs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_disjoint() {
        for (lo, hi) in HIDDEN {
            assert!(lo <= hi, "{lo:#x}..{hi:#x}");
            assert!(char::from_u32(*lo).is_some() && char::from_u32(*hi).is_some());
        }
        for pair in HIDDEN.windows(2) {
            assert!(pair[0].1 < pair[1].0, "{:x?} then {:x?}", pair[0], pair[1]);
        }
    }

    #[test]
    fn hidden_and_confusable_characters_are_flagged() {
        let hidden = [
            0x00, 0x07, 0x09, 0x0A, 0x0D, 0x1B, 0x1F, 0x7F, 0x80, 0x9B, 0x9F, // controls
            0xAD, 0x34F, 0x61C, 0x600, 0x6DD, 0x70F, 0x8E2, // soft hyphen, CGJ, Cf
            0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, // fillers, blank
            0x17B4, 0x17B5, 0x180B, 0x180E, 0x180F, // Khmer, Mongolian
            0x200B, 0x200C, 0x200D, 0x200E, 0x200F, // zero-width, marks
            0x2028, 0x2029, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, // bidi embeddings
            0x2060, 0x2061, 0x2062, 0x2063, 0x2064,
            0x2065, // word joiner, invisible operators
            0x2066, 0x2067, 0x2068, 0x2069, 0x206A, 0x206F, // isolates, deprecated
            0xFE00, 0xFE0E, 0xFE0F, 0xFEFF, 0xFFF0, 0xFFF9, 0xFFFB, // selectors, BOM
            0x110BD, 0x13430, 0x1343F, 0x1BCA0, 0x1BCA3, 0x1D173, 0x1D17A, // Cf
            0xE0000, 0xE0001, 0xE0020, 0xE0041, 0xE0049, 0xE007E, 0xE007F, // tags
            0xE0100, 0xE01EF, 0xE0FFF, // variation selectors supplement
        ];
        for cp in hidden {
            let c = char::from_u32(cp).unwrap();
            assert!(is_hidden(c), "U+{cp:04X} must be hidden");
        }
    }

    #[test]
    fn ordinary_text_is_not_flagged() {
        let ordinary = "The quick brown fox, 0123456789 !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \
            é ñ ß Æ ø ő ł Ω λ Ж я א ש ع ب हिन्दी ไทย 한국어 日本語 中文 漢字 ㄱㄴ ＡＢ 　 \
            😀 🎉 🚀 🦀 ✓ → ⟨⟩ … – — € ¥ ° ½ ² ¬ ¦ ¨ ´ ¸ × ÷ ␀ ⡀ ⣿ \u{A0} \u{2003} \u{3000} \u{FFFD} 𝔸 🇫🇷";
        for c in ordinary.chars() {
            assert!(!is_hidden(c), "{} must not be hidden", code_point(c));
        }
        assert!(!has_hidden("line one\n\tline two"));
        assert!(has_hidden("safe\u{E0049}\u{E0047}"));
        assert!(has_hidden("heart \u{2764}\u{FE0F}"));
    }

    #[test]
    fn every_format_character_in_the_bmp_sample_is_hidden() {
        // The Cf characters of the Basic Multilingual Plane (Unicode 15).
        let cf = [
            0xAD, 0x600, 0x601, 0x602, 0x603, 0x604, 0x605, 0x61C, 0x6DD, 0x70F, 0x890, 0x891,
            0x8E2, 0x180E, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D,
            0x202E, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x2066, 0x2067, 0x2068, 0x2069, 0x206A,
            0x206B, 0x206C, 0x206D, 0x206E, 0x206F, 0xFEFF, 0xFFF9, 0xFFFA, 0xFFFB,
        ];
        for cp in cf {
            assert!(is_hidden(char::from_u32(cp).unwrap()), "U+{cp:04X}");
        }
    }

    #[test]
    fn lookup_matches_a_linear_scan() {
        for cp in (0..0x11_0000u32)
            .step_by(7)
            .chain([0xE007F, 0xE0080, 0x10FFFF])
        {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            let linear = HIDDEN.iter().any(|&(lo, hi)| lo <= cp && cp <= hi);
            assert_eq!(is_hidden(c), linear, "U+{cp:04X}");
        }
    }

    proptest::proptest! {
        #[test]
        fn lookup_agrees_with_the_table(c in proptest::prelude::any::<char>()) {
            let cp = u32::from(c);
            let linear = HIDDEN.iter().any(|&(lo, hi)| lo <= cp && cp <= hi);
            proptest::prop_assert_eq!(is_hidden(c), linear);
            // Every control character (Cc) is hidden.
            if c.is_control() {
                proptest::prop_assert!(is_hidden(c));
            }
        }
    }

    #[test]
    fn agent_texts_list_every_text_an_agent_wrote() {
        let mut request = InteractionRequest::new(
            "s-1",
            InteractionKind::ToolApproval {
                tool_name: "deploy".into(),
                args_json: "{}".into(),
                missing_capabilities: vec!["net".into()],
                sandbox_mode: "read-only".into(),
                options: vec!["yes".into()],
            },
        );
        request.id = Some("ir_1".into());
        request.title = Some("t".into());
        request.caller = Some("alice".into());
        request.conversation_id = Some("c".into());
        request.reason = Some("why".into());
        request.gate = Some(crate::interaction::GateNote {
            rule_tool: Some("deploy*".into()),
            rule_reason: Some("prod".into()),
            risk: Some("high".into()),
            ..Default::default()
        });
        assert_eq!(
            agent_texts(&request),
            [
                "s-1",
                "ir_1",
                "t",
                "alice",
                "c",
                "why",
                "deploy",
                "{}",
                "read-only",
                "net",
                "yes",
                "deploy*",
                "prod",
                "high"
            ]
        );
        request.kind = InteractionKind::InteractionPoints {
            prompt: "p".into(),
            points: vec![crate::interaction::Point {
                id: "a".into(),
                text: "b".into(),
            }],
        };
        request.gate = None;
        assert_eq!(
            agent_texts(&request),
            ["s-1", "ir_1", "t", "alice", "c", "why", "p", "a", "b"]
        );
    }

    #[test]
    fn tag_characters_spell_their_ascii() {
        let text = "safe\u{E0049}\u{E0047}\u{E004E}x\u{E0001}\u{E007F}\u{E0020}";
        assert_eq!(tag_chars(text).collect::<String>(), "IGN ");
        assert_eq!(tag_chars("plain").count(), 0);
    }

    #[test]
    fn ranges_as_json() {
        let json = hidden_ranges_json();
        let parsed: Vec<(u32, u32)> = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed, HIDDEN);
    }
}
