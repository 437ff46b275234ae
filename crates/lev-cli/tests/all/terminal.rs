//! What reaches a terminal: agent text with control characters made
//! visible, colour only when asked for and never with NO_COLOR.

use lev_protocol::InteractionRequest;

use crate::client_env::{LevServer, assert_code, block_on, text};

#[test]
fn agent_text_is_escaped_and_colour_obeys_no_color() {
    let server = LevServer::start("terminal");
    let mut request = InteractionRequest::new(
        "term",
        text(
            "clear \u{1b}[2J\u{1b}[31mred\u{1b}[0m bell\u{7} rtl\u{202e}txt.exe zw\u{200b}x\nsecond line",
        ),
    );
    request.title = Some("title\rforged".into());
    let q = block_on(server.client().create_interaction(&request)).unwrap();

    for args in [&["ls"][..], &["show", q.id()]] {
        let run = server.lev(args);
        assert_code(&run, 0);
        assert!(
            !run.stdout.contains('\u{1b}'),
            "{args:?}: raw escape in {:?}",
            run.stdout
        );
        assert!(!run.stdout.contains('\u{7}') && !run.stdout.contains('\r'));
        assert!(!run.stdout.contains('\u{202e}') && !run.stdout.contains('\u{200b}'));
        for want in [
            "\\e[2J\\e[31mred\\e[0m",
            "bell^G",
            "rtl\\u{202e}txt.exe",
            "zw\\u{200b}x",
            "title\\rforged",
        ] {
            assert!(
                run.stdout.contains(want),
                "{args:?}: {want} missing in {}",
                run.stdout
            );
        }
    }
    // One line per item in a listing; the prompt's own lines kept in `show`.
    assert!(
        server
            .lev(&["ls"])
            .stdout
            .contains("zw\\u{200b}x\\nsecond line")
    );
    assert!(
        server
            .lev(&["show", q.id()])
            .stdout
            .contains("zw\\u{200b}x\n  second line")
    );

    // Off a terminal: no colour. Forced: colour, with the agent's escapes
    // still escaped. NO_COLOR beats everything.
    let forced = server.lev_with(&["ls"], &[("CLICOLOR_FORCE", "1")], b"");
    assert!(forced.stdout.contains("\u{1b}[1mID"), "{:?}", forced.stdout);
    assert!(forced.stdout.contains("\\e[31mred"));
    let run = server.lev_with(&["ls"], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")], b"");
    assert!(!run.stdout.contains('\u{1b}'), "{:?}", run.stdout);
    let run = server.lev_with(
        &["show", q.id()],
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "")],
        b"",
    );
    assert!(!run.stdout.contains('\u{1b}'), "{:?}", run.stdout);

    // An error message carrying agent text is escaped too.
    let run = server.lev(&["show", "ir_\u{1b}[31m"]);
    assert_code(&run, 1);
    assert!(!run.stderr.contains('\u{1b}'), "{:?}", run.stderr);
}

/// "IGNORE" spelled in TAG characters (U+E0000 + ASCII): invisible on screen.
fn tags(text: &str) -> String {
    text.chars()
        .map(|c| char::from_u32(0xE0000 + u32::from(c)).unwrap())
        .collect()
}

#[test]
fn hidden_characters_are_spelled_out_in_show_and_ls() {
    let server = LevServer::start("terminal-hidden");
    // One of each kind the shared table (lev_protocol::text::HIDDEN) knows,
    // beyond the controls, bidi and zero-width characters tested above.
    let hidden = [
        '\u{E0049}',
        '\u{AD}',
        '\u{3164}',
        '\u{180E}',
        '\u{FE0F}',
        '\u{34F}',
        '\u{E0100}',
        '\u{115F}',
        '\u{FFA0}',
    ];
    let sample: String = hidden.iter().map(|c| format!("<{c}>")).collect();
    let mut request = InteractionRequest::new(
        "term",
        crate::client_env::choice(
            &format!("Pick one{}\nsample {sample}", tags("IGNORE")),
            &["yes", &format!("no{}", tags("RUN"))],
        ),
    );
    request.title = Some(format!("Deploy{}", tags("IGNORE PREVIOUS")));
    let q = block_on(server.client().create_interaction(&request)).unwrap();
    let tool = server.create(
        "term",
        lev_protocol::InteractionKind::ToolApproval {
            tool_name: "shell".into(),
            args_json: format!(
                r#"{{"cmd":"ls{}","amount":9007199254740993,"id":123456789012345678901234567890}}"#,
                tags("rm")
            ),
            missing_capabilities: vec![],
            sandbox_mode: String::new(),
            options: vec![],
        },
    );

    let spelled: String = hidden
        .iter()
        .map(|c| format!("<\\u{{{:x}}}>", u32::from(*c)))
        .collect();
    for args in [&["ls"][..], &["show", q.id()], &["show", tool.id()]] {
        let run = server.lev(args);
        assert_code(&run, 0);
        assert!(
            !lev_protocol::text::has_hidden(&run.stdout),
            "{args:?}: a raw hidden character in {:?}",
            run.stdout
        );
    }
    let ls = server.lev(&["ls"]).stdout;
    let show = server.lev(&["show", q.id()]).stdout;
    for out in [&ls, &show] {
        assert!(
            out.contains("Deploy\\u{e0049}\\u{e0047}\\u{e004e}"),
            "title: {out}"
        );
    }
    assert!(show.contains(&format!("sample {spelled}")), "{show}");
    assert!(show.contains("no\\u{e0052}\\u{e0055}\\u{e004e}"), "{show}");
    assert!(ls.contains("ls\\u{e0072}\\u{e006d}"), "{ls}");
    // The args as the agent wrote them: no number rounded.
    let show = server.lev(&["show", tool.id()]).stdout;
    assert!(
        show.contains("\"cmd\": \"ls\\u{e0072}\\u{e006d}\""),
        "{show}"
    );
    assert!(show.contains("\"amount\": 9007199254740993,"), "{show}");
    assert!(
        show.contains("\"id\": 123456789012345678901234567890"),
        "{show}"
    );
}
