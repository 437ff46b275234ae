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
