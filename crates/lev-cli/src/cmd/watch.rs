//! `lev watch`: the live inbox in a terminal (SPEC section 16). The IO edge
//! of [`crate::watch`]: the terminal, the event stream, answers, `$EDITOR`.

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use anyhow::Context as _;
use crossterm::event::{self, Event};
use crossterm::{cursor, execute, terminal};
use lev_client::{Client, ListQuery};
use lev_protocol::InteractionResponse;
use lev_protocol::api::InteractionView;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use crate::connect::ClientArgs;
use crate::watch::model::{Action, App, Msg, RespondError};
use crate::watch::view::{self, Theme};

/// The live inbox: see and answer interactions as they come.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Keys (as in the dashboard):\n  j/k move, r reply, 1-9 choose, a approve, s scope (once, session, always),\n  d deny, f deny with feedback, e edit the args in $EDITOR (a diff is shown\n  before sending), i inject context, / filter (session:S kind:K words),\n  g grants (x revokes), ? help, q or Ctrl-C quit.\n\nColour follows NO_COLOR. The event stream resumes by itself after a drop."
)]
pub struct Args {
    /// Show only this session's interactions (the filter, changed with /).
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// Your key signs your votes on tool calls when you have one (lev key init).
    #[command(flatten)]
    key: super::key::KeyFile,
    #[command(flatten)]
    client: ClientArgs,
}

/// Run `lev watch`.
///
/// # Errors
/// No terminal, no token, a terminal that cannot be set up.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "lev watch needs a terminal{}use `lev ls` and `lev respond` in scripts",
            crate::report::HINT
        );
    }
    let client = args.client.client()?;
    let key: PersonKey = args.key.load()?.map(Arc::new);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (tx, rx) = mpsc::channel::<Msg>();
    let stop = Arc::new(AtomicBool::new(false));
    rt.spawn(follow(client.clone(), tx.clone()));
    rt.spawn(signals(Arc::clone(&stop)));
    std::thread::spawn(watch_terminal);

    let mut app = App::new(client.base_url(), time::OffsetDateTime::now_utc());
    if let Some(session) = args.session {
        app.filter = format!("session:{session}");
    }
    let theme = Theme::from_env();

    install_panic_hook();
    let mut screen = Screen::enter().context("setting up the terminal")?;
    let io = Io {
        rt: &rt,
        client: &client,
        key: &key,
        tx: &tx,
    };
    let result = event_loop(&mut screen, &mut app, theme, &io, &rx, &stop);
    drop(screen);
    rt.shutdown_timeout(Duration::from_millis(200));
    result?;
    Ok(ExitCode::SUCCESS)
}

/// What the IO edge works with: the runtime, the client, the person's key
/// and the channel back to the model.
struct Io<'a> {
    rt: &'a tokio::runtime::Runtime,
    client: &'a Client,
    key: &'a PersonKey,
    tx: &'a mpsc::Sender<Msg>,
}

fn event_loop(
    screen: &mut Screen,
    app: &mut App,
    theme: Theme,
    io: &Io<'_>,
    rx: &mpsc::Receiver<Msg>,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    loop {
        app.now = time::OffsetDateTime::now_utc();
        screen
            .terminal
            .draw(|frame| view::draw(frame, app, theme))
            .context("drawing")?;
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        // Debug builds only: a panic on demand, so the tests can check that
        // a panic leaves the terminal as it found it.
        #[cfg(debug_assertions)]
        if std::env::var_os("LEV_WATCH_TEST_PANIC").is_some() {
            panic!("LEV_WATCH_TEST_PANIC is set: panicking to test the terminal's restore");
        }
        if event::poll(Duration::from_millis(100)).context("reading the terminal")?
            && let Event::Key(key) = event::read().context("reading the terminal")?
            && let Some(action) = app.on_key(key)
        {
            perform(action, screen, app, io)?;
        }
        while let Ok(msg) = rx.try_recv() {
            app.on_msg(msg);
        }
        if app.quit {
            return Ok(());
        }
    }
}

/// The person's signing key, when they have one.
type PersonKey = Option<Arc<(std::path::PathBuf, lev_approval::SigningKeyPair)>>;

fn perform(action: Action, screen: &mut Screen, app: &mut App, io: &Io<'_>) -> anyhow::Result<()> {
    let Io {
        rt,
        client,
        key,
        tx,
    } = *io;
    match action {
        Action::Quit => {}
        Action::Respond { id, response } => {
            let response = match attach(*response) {
                Ok(response) => response,
                Err(e) => {
                    app.on_msg(Msg::Responded {
                        id,
                        result: Err(RespondError {
                            message: first_line(&format!("{e:#}")),
                            winner: None,
                        }),
                    });
                    return Ok(());
                }
            };
            let (client, tx, key) = (client.clone(), tx.clone(), key.clone());
            rt.spawn(async move {
                let mut response = response;
                // A decision on a tool call is the person's vote: signed with
                // their own key when they have one.
                if let (Some(key), Some(_)) = (&key, response.approved) {
                    let (path, key) = &**key;
                    let signed = match client.get_interaction(&id).await {
                        Ok(view) => {
                            super::key::sign_vote(&client, &view, &mut response, path, key).await
                        }
                        Err(e) => Err(e.into()),
                    };
                    if let Err(e) = signed {
                        let _ = tx.send(Msg::Responded {
                            id,
                            result: Err(RespondError {
                                message: first_line(&format!("{e:#}")),
                                winner: None,
                            }),
                        });
                        return;
                    }
                }
                let msg = match client.respond(&id, &response).await {
                    Ok(r) if r.status == Some(lev_protocol::InteractionStatus::Pending) => {
                        Msg::Voted {
                            id,
                            votes: r.votes,
                            needed: r.approvals_needed.unwrap_or(1),
                        }
                    }
                    Ok(r) => Msg::Responded {
                        id,
                        result: Ok(r.response),
                    },
                    Err(e) => Msg::Responded {
                        id,
                        result: Err(RespondError {
                            message: first_line(&e.to_string()),
                            winner: e.winner().cloned(),
                        }),
                    },
                };
                let _ = tx.send(msg);
            });
        }
        Action::LoadGrants => {
            let (client, tx) = (client.clone(), tx.clone());
            rt.spawn(async move {
                let result = client
                    .grants()
                    .await
                    .map_err(|e| first_line(&e.to_string()));
                let _ = tx.send(Msg::Grants(result));
            });
        }
        Action::Revoke(id) => {
            let (client, tx) = (client.clone(), tx.clone());
            rt.spawn(async move {
                let result = client
                    .revoke_grant(&id)
                    .await
                    .map_err(|e| first_line(&e.to_string()));
                let _ = tx.send(Msg::Revoked(result));
            });
        }
        Action::Edit { id, text } => {
            let result = screen.suspended(|| edit_in_editor(&text))?;
            app.on_msg(Msg::Edited { id, result });
        }
    }
    Ok(())
}

/// A text answer's `@path` words attach those files (read here, on the
/// person's machine, as `lev respond --text` does).
fn attach(mut response: InteractionResponse) -> anyhow::Result<InteractionResponse> {
    if let Some(value) = &response.value {
        for path in super::respond::at_paths(value)? {
            response.parts.push(super::respond::read_part(&path)?);
        }
    }
    Ok(response)
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

/// Follow `/v1/events`: list what is pending once the stream is open, then
/// pass every interaction event on; after a drop, reconnect with
/// `Last-Event-ID` so nothing in between is missed.
async fn follow(client: Client, tx: mpsc::Sender<Msg>) {
    /// A stream silent this long (the server sends keep-alives) is dead.
    const SILENCE: Duration = Duration::from_secs(45);
    let mut last: Option<String> = None;
    let mut listed = false;
    let mut attempt: u32 = 0;
    loop {
        let error = match client.events(last.as_deref()).await {
            Ok(mut stream) => {
                if !listed {
                    let query = ListQuery {
                        limit: Some(500),
                        ..ListQuery::default()
                    };
                    match client.list_interactions(&query).await {
                        Ok(page) => {
                            listed = true;
                            if tx.send(Msg::Listed(page.items)).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            attempt += 1;
                            let msg = Msg::Disconnected {
                                error: first_line(&e.to_string()),
                                attempt,
                            };
                            if tx.send(msg).is_err() {
                                return;
                            }
                            tokio::time::sleep(backoff(attempt)).await;
                            continue;
                        }
                    }
                }
                if tx.send(Msg::Connected).is_err() {
                    return;
                }
                let connected = tokio::time::Instant::now();
                let error = loop {
                    match tokio::time::timeout(SILENCE, stream.next()).await {
                        Ok(Ok(Some(ev))) => {
                            if ev.id.is_some() {
                                last.clone_from(&ev.id);
                            }
                            if !ev.event.starts_with("interaction.") {
                                continue;
                            }
                            let Ok(mut view) = serde_json::from_str::<InteractionView>(&ev.data)
                            else {
                                continue;
                            };
                            // An event's JSON has its keys sorted: a form's
                            // fields in the order written are in its own read.
                            if matches!(
                                view.request.request.kind,
                                lev_protocol::InteractionKind::Form { .. }
                            ) && let Ok(read) = client.get_interaction(view.request.id()).await
                            {
                                view.request.request.kind = read.request.request.kind;
                            }
                            let msg = Msg::Event {
                                id: ev.id,
                                view: Box::new(view),
                            };
                            if tx.send(msg).is_err() {
                                return;
                            }
                        }
                        Ok(Ok(None)) => break "the server closed the event stream".to_owned(),
                        Ok(Err(e)) => break first_line(&e.to_string()),
                        Err(_) => break "no word from the server for 45s".to_owned(),
                    }
                };
                // From the first delay again only after a stream that held:
                // one the server closes at once is a failed attempt.
                if connected.elapsed() >= MAX_BACKOFF {
                    attempt = 0;
                }
                error
            }
            Err(e) => first_line(&e.to_string()),
        };
        attempt += 1;
        if tx.send(Msg::Disconnected { error, attempt }).is_err() {
            return;
        }
        tokio::time::sleep(backoff(attempt)).await;
    }
}

/// The longest wait between two attempts to follow the event stream.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// 0.5 s, 1 s, 2 s, then every 5 s, each with jitter (up to half less), so
/// that many watchers do not come back in step.
fn backoff(attempt: u32) -> Duration {
    let base = Duration::from_millis(500u64 << attempt.saturating_sub(1).min(4));
    lev_client::backoff::jittered(base.min(MAX_BACKOFF))
}

/// How long the watcher may take to end by itself once told to (it looks at
/// `stop` every 100 ms), before it is made to.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// SIGTERM and SIGHUP (the SSH session or the terminal gone) end the watcher
/// as `q` does, restoring the terminal; if it has not ended within
/// [`STOP_GRACE`] (its terminal gone, a read of it stuck), the process ends
/// here (128 + the signal). Ctrl-C arrives as a key in raw mode.
async fn signals(stop: Arc<AtomicBool>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        let code = tokio::select! {
            _ = term.recv() => 128 + 15,
            _ = hup.recv() => 128 + 1,
        };
        stop.store(true, Ordering::Relaxed);
        tokio::time::sleep(STOP_GRACE).await;
        restore();
        std::process::exit(code);
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        stop.store(true, Ordering::Relaxed);
    }
}

/// How often [`watch_terminal`] looks.
const TERMINAL_CHECK: Duration = Duration::from_millis(250);

/// End the process when its terminal goes away (the terminal emulator or
/// tmux killed, the SSH connection gone) even if no SIGHUP comes: a hung-up
/// terminal reads end-of-file for ever, and crossterm's reader would spin on
/// it at 100% CPU inside `event::poll`, never returning to the loop. A
/// terminal that hung up is no longer a terminal (its ioctls fail with EIO),
/// which this thread sees within [`TERMINAL_CHECK`].
fn watch_terminal() {
    loop {
        std::thread::sleep(TERMINAL_CHECK);
        if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
            restore();
            // Not eprintln!: stderr is most likely that terminal, and a
            // failed write must not stop this thread short of the exit.
            let _ = writeln!(
                std::io::stderr(),
                "lev: the terminal went away; lev watch stops"
            );
            std::process::exit(i32::from(crate::exit::ERROR));
        }
    }
}

/// Write `text` to a temporary file, open `$VISUAL` or `$EDITOR` (else `vi`)
/// on it, and read it back.
fn edit_in_editor(text: &str) -> Result<String, String> {
    let mut file = tempfile::Builder::new()
        .prefix("lev-args-")
        .suffix(".json")
        .tempfile()
        .map_err(|e| format!("a temporary file: {e}"))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.flush())
        .map_err(|e| format!("writing {}: {e}", file.path().display()))?;
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "vi".to_owned());
    // Through the shell, so `EDITOR="code --wait"` works as elsewhere.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file.path())
        .status()
        .map_err(|e| format!("running {editor}: {e}"))?;
    if !status.success() {
        return Err(format!("{editor} exited with {status}; nothing changed"));
    }
    lev_client::files::read_text(file.path(), lev_client::files::limit::ARGS)
        .map_err(|e| e.to_string())
}

/// The terminal in raw mode on the alternate screen; restored when dropped.
struct Screen {
    terminal: Terminal<CrosstermBackend<std::io::Stdout>>,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Screen")
    }
}

impl Screen {
    fn enter() -> std::io::Result<Self> {
        setup()?;
        let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
        terminal.clear()?;
        Ok(Self { terminal })
    }

    /// Give the terminal back for `work` (an editor), then take it again.
    fn suspended<T>(&mut self, work: impl FnOnce() -> T) -> anyhow::Result<T> {
        restore();
        let out = work();
        setup().context("setting up the terminal again")?;
        self.terminal.clear().context("redrawing")?;
        Ok(out)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

fn setup() -> std::io::Result<()> {
    TERMINAL_TAKEN.store(true, Ordering::SeqCst);
    terminal::enable_raw_mode()?;
    execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        cursor::Hide
    )
}

/// Whether the terminal is set up (raw mode, alternate screen) now.
static TERMINAL_TAKEN: AtomicBool = AtomicBool::new(false);

/// Leave raw mode and the alternate screen, once: a second call (the
/// screen's drop after the panic hook restored) does nothing, since leaving
/// the alternate screen again would move the cursor back over what the
/// panic printed.
fn restore() {
    if !TERMINAL_TAKEN.swap(false, Ordering::SeqCst) {
        return;
    }
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

/// A panic restores the terminal before its message is printed.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}
