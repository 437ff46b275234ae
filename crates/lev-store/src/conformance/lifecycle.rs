//! The lifecycle against a model: generated sequences of creates, answers,
//! cancels, expiry passes, nonce spends, tool approvals that make session or
//! always grants, grant revocations, restarts and races, from two handles
//! where the backend allows (an answer against a cancel, an answer against
//! an expiry pass, a nonce spent twice at once, one tool approval approved
//! twice at once), are run on the store and on a plain model of the states
//! (pending, answered, expired, cancelled: a question that times out is
//! cancelled, or expired when its `on_timeout` is `deny`), of spent nonces
//! and of the grants in force (one per key, renewed by a later approval);
//! every outcome and the final state must agree. Sequences come from fixed
//! seeds, so a failure names the seed and the step that reproduce it;
//! `LEV_TRACE_MODEL=1` prints every step, and `LEV_MODEL_SEEDS=N` runs N
//! more seeds (the long run by hand).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use lev_protocol::api::Grant;
use lev_protocol::{ApprovalScope, InteractionStatus};
use time::OffsetDateTime;

use super::Backend;
use super::fixtures::{answer, answer_tool_approval, free_text, tool_approval};
use super::interactions::handles;
use crate::gate::{NewGrant, NonceOutcome};
use crate::{CreateOutcome, NewInteraction, Store, TransitionOutcome};

/// A grant's key in the model: its scope and conversation (caller, tool and
/// sandbox mode are the seed's own and fixed).
type GrantKey = (&'static str, Option<String>);

/// The model's state of one interaction.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Pending,
    Answered(String),
    Expired,
    Cancelled,
}

/// What a transition did, as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Did {
    Done,
    AlreadyAnswered,
    Gone,
    NotFound,
}

fn did(outcome: &TransitionOutcome) -> Did {
    match outcome {
        TransitionOutcome::Done(_) => Did::Done,
        TransitionOutcome::AlreadyAnswered(_) => Did::AlreadyAnswered,
        TransitionOutcome::Gone(_) => Did::Gone,
        TransitionOutcome::NotFound => Did::NotFound,
    }
}

#[derive(Debug, Default)]
struct Model {
    interactions: BTreeMap<usize, State>,
    spent: BTreeSet<usize>,
    /// Grants in force: key -> the interaction whose approval made or last
    /// renewed it.
    grants: BTreeMap<GrantKey, String>,
}

impl Model {
    /// What an answer or a cancel does to interaction `i`.
    fn transition(&self, i: usize) -> Did {
        match self.interactions.get(&i) {
            None => Did::NotFound,
            Some(State::Pending) => Did::Done,
            Some(State::Answered(_)) => Did::AlreadyAnswered,
            Some(State::Expired | State::Cancelled) => Did::Gone,
        }
    }

    /// An expiry pass: the questions that time out (see [`create`]) and are
    /// pending move; their ids.
    fn expire(&mut self) -> BTreeSet<String> {
        let mut moved = BTreeSet::new();
        for (k, state) in &mut self.interactions {
            // A seed's keys are its base (a multiple of 100) plus the index.
            if *k % 100 < TOOL && *state == State::Pending {
                match timeout_of(*k) {
                    Timeout::Never => continue,
                    Timeout::Cancel => *state = State::Cancelled,
                    Timeout::Deny => *state = State::Expired,
                }
                moved.insert(id(*k));
            }
        }
        moved
    }
}

/// What a question does when it times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timeout {
    /// It has no timeout.
    Never,
    /// The free-text default: cancelled.
    Cancel,
    /// `on_timeout: deny`: expired.
    Deny,
}

fn timeout_of(key: usize) -> Timeout {
    match key % 3 {
        0 => Timeout::Cancel,
        1 => Timeout::Deny,
        _ => Timeout::Never,
    }
}

/// A small xorshift generator: the sequences are the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n as u64).unwrap_or(0)
    }
}

const IDS: usize = 6;

fn id(i: usize) -> String {
    format!("ir_m{i}")
}

/// Tool approvals have keys of their own, above the questions'.
const TOOL: usize = 50;
/// How many tool approvals a seed uses.
const TOOLS: usize = 30;

/// The seed's grants: its own caller.
fn caller(base: usize) -> String {
    format!("m{base}")
}

fn grant_for(base: usize, interaction: &str, key: &GrantKey) -> Grant {
    Grant {
        id: format!("gr_{interaction}"),
        scope: if key.0 == "always" {
            ApprovalScope::Always
        } else {
            ApprovalScope::Session
        },
        caller: caller(base),
        conversation_id: key.1.clone(),
        sandbox_mode: "read-only".into(),
        tool_name: "shell".into(),
        covered_capabilities: vec!["exec".into()],
        grant_args: None,
        approver: "bob".into(),
        interaction_id: Some(interaction.to_owned()),
        created_at: OffsetDateTime::now_utc(),
    }
}

async fn grants_of(store: &Arc<dyn Store>, base: usize) -> BTreeMap<GrantKey, Grant> {
    store
        .list_grants()
        .await
        .unwrap()
        .into_iter()
        .filter(|g| g.caller == caller(base))
        .map(|g| ((g.scope.as_str(), g.conversation_id.clone()), g))
        .collect()
}

/// A question that times out (at the next expiry pass) as
/// [`timeout_of`] says.
fn create(i: usize) -> NewInteraction {
    let mut new = free_text(&id(i));
    let timeout = timeout_of(i);
    if timeout != Timeout::Never {
        new.interaction.expires_at = Some(OffsetDateTime::UNIX_EPOCH + time::Duration::days(1));
    }
    if timeout == Timeout::Deny {
        new.interaction.request.on_timeout = Some(lev_protocol::OnTimeout::Deny);
    }
    new
}

/// The ids of this seed's questions among `views`.
fn ours(views: Vec<crate::InteractionView>, base: usize) -> BTreeSet<String> {
    let this_seed: BTreeSet<String> = (base..base + IDS).map(id).collect();
    views
        .into_iter()
        .map(|v| v.request.id().to_owned())
        .filter(|e| this_seed.contains(e))
        .collect()
}

pub async fn the_lifecycle_follows_the_model(b: &dyn Backend) {
    let more: u64 = std::env::var("LEV_MODEL_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    for seed in [1_u64, 7, 42, 1_000_003, 0x5eed]
        .into_iter()
        .chain((1..=more).map(|n| n * 7919 + 13))
    {
        run_one(b, seed).await;
    }
}

/// Two handles for a race: different ones where there are two, in either
/// order.
fn two(stores: &[Arc<dyn Store>], rng: &mut Rng) -> (Arc<dyn Store>, Arc<dyn Store>) {
    let (first, last) = (
        Arc::clone(&stores[0]),
        Arc::clone(&stores[stores.len() - 1]),
    );
    if rng.below(2) == 0 {
        (first, last)
    } else {
        (last, first)
    }
}

async fn run_one(b: &dyn Backend, seed: u64) {
    let mut run = Run {
        b,
        stores: handles(b).await,
        seed,
        // Each seed on ids of its own: the backend's database is shared by
        // the seeds of one test.
        base: usize::try_from(seed % 10_000).unwrap_or(0) * 100,
        rng: Rng(seed),
        model: Model::default(),
    };
    for step in 0..80 {
        run.step(step).await;
    }
    run.check_final().await;
}

fn tracing() -> bool {
    std::env::var_os("LEV_TRACE_MODEL").is_some()
}

/// The grants in force among the seed's, by key: the interaction whose
/// approval made or last renewed each.
async fn grants_in_force(store: &Arc<dyn Store>, base: usize) -> BTreeMap<GrantKey, String> {
    grants_of(store, base)
        .await
        .into_iter()
        .map(|(k, g)| (k, g.interaction_id.unwrap_or_default()))
        .collect()
}

/// One seed's run: the handles, the generator and the model.
struct Run<'a> {
    b: &'a dyn Backend,
    stores: Vec<Arc<dyn Store>>,
    seed: u64,
    base: usize,
    rng: Rng,
    model: Model,
}

/// One step: where it is (for messages), its number, the interaction's
/// key and the handle it runs on.
struct Step {
    at: String,
    n: usize,
    key: usize,
    store: Arc<dyn Store>,
}

impl Run<'_> {
    async fn step(&mut self, n: usize) {
        let at = format!("seed {}, step {n}", self.seed);
        if tracing() {
            eprintln!("{at}");
        }
        let store = Arc::clone(&self.stores[self.rng.below(self.stores.len())]);
        let key = self.base + self.rng.below(IDS);
        let op = self.rng.below(16);
        if tracing() {
            eprintln!(
                "  op {op} on {} (model {:?})",
                id(key),
                self.model.interactions.get(&key)
            );
        }
        let s = Step { at, n, key, store };
        match op {
            0 | 1 => self.create(&s).await,
            2 | 3 => self.answer(&s).await,
            4 => self.cancel(&s).await,
            5 => self.expire(&s).await,
            13 => self.answer_beside_expiry(&s).await,
            14 => self.nonce_twice_at_once(&s).await,
            6 | 7 => self.nonce(&s).await,
            8 => self.answer_beside_cancel(&s).await,
            9 | 10 => self.approve_with_grant(&s).await,
            11 => self.revoke_grant(&s).await,
            15 => self.approve_twice_at_once(&s).await,
            _ => {
                // A restart: every handle dropped, the database opened anew.
                drop(s);
                self.stores.clear();
                self.stores = handles(self.b).await;
            }
        }
    }

    async fn create(&mut self, s: &Step) {
        let (at, key) = (&s.at, s.key);
        let outcome = s.store.create_interaction(create(key)).await.unwrap();
        let exists = self.model.interactions.contains_key(&key);
        match outcome {
            CreateOutcome::Created(_) => {
                assert!(!exists, "{at}: created {} twice", id(key));
                self.model.interactions.insert(key, State::Pending);
            }
            CreateOutcome::Existing(_) => {
                assert!(exists, "{at}: {} existed before its create", id(key));
            }
            other => panic!("{at}: create {}: {other:?}", id(key)),
        }
    }

    async fn answer(&mut self, s: &Step) {
        let (at, key) = (&s.at, s.key);
        let value = format!("a{}", s.n);
        let outcome = s
            .store
            .answer_interaction(answer(&id(key), &value, "alice"))
            .await
            .unwrap();
        let expected = self.model.transition(key);
        assert_eq!(did(&outcome), expected, "{at}: answer {}", id(key));
        if expected == Did::Done {
            self.model.interactions.insert(key, State::Answered(value));
        }
    }

    async fn cancel(&mut self, s: &Step) {
        let (at, key) = (&s.at, s.key);
        let outcome = s.store.cancel_interaction(&id(key), "w").await.unwrap();
        let expected = self.model.transition(key);
        assert_eq!(did(&outcome), expected, "{at}: cancel {}", id(key));
        if expected == Did::Done {
            self.model.interactions.insert(key, State::Cancelled);
        }
    }

    async fn expire(&mut self, s: &Step) {
        let expired = s.store.expire_due(OffsetDateTime::now_utc()).await.unwrap();
        let expected = self.model.expire();
        assert_eq!(ours(expired, self.base), expected, "{}: expiry", s.at);
    }

    /// An answer against an expiry pass, from two handles: the question
    /// moves once, by whichever came first.
    async fn answer_beside_expiry(&mut self, s: &Step) {
        let (at, key) = (&s.at, s.key);
        let (a, e) = two(&self.stores, &mut self.rng);
        let value = format!("late{}", s.n);
        let (answered, expired) = tokio::join!(
            tokio::spawn({
                let (key, value) = (id(key), value.clone());
                async move { a.answer_interaction(answer(&key, &value, "bob")).await }
            }),
            tokio::spawn(async move { e.expire_due(OffsetDateTime::now_utc()).await }),
        );
        let answered = did(&answered.unwrap().unwrap());
        let expired = ours(expired.unwrap().unwrap(), self.base);
        let before = self.model.transition(key);
        let expiring = timeout_of(key) != Timeout::Never;
        let mut expected = self.model.expire();
        if before == Did::Done && expiring {
            // It was pending and times out: one of the two won.
            if answered == Did::Done {
                self.model.interactions.insert(key, State::Answered(value));
                expected.remove(&id(key));
            } else {
                assert_eq!(answered, Did::Gone, "{at}: answer lost to expiry");
            }
        } else {
            assert_eq!(answered, before, "{at}: answer beside expiry");
            if before == Did::Done {
                self.model.interactions.insert(key, State::Answered(value));
            }
        }
        assert_eq!(expired, expected, "{at}: expiry beside an answer");
    }

    /// One nonce spent twice at once, from two handles: exactly one spend
    /// takes it.
    async fn nonce_twice_at_once(&mut self, s: &Step) {
        let (x, y) = two(&self.stores, &mut self.rng);
        let nonce = self.base + self.rng.below(4);
        let name = format!("nonce-m{nonce}");
        let (first, second) = tokio::join!(
            tokio::spawn({
                let name = name.clone();
                async move { x.consume_nonce(&name, "w").await }
            }),
            tokio::spawn(async move { y.consume_nonce(&name, "w").await }),
        );
        let outcomes = [first.unwrap().unwrap(), second.unwrap().unwrap()];
        let spent = outcomes
            .iter()
            .filter(|o| **o == NonceOutcome::Spent)
            .count();
        let fresh = self.model.spent.insert(nonce);
        assert_eq!(
            spent,
            usize::from(fresh),
            "{}: nonce {nonce} at once: {outcomes:?}",
            s.at
        );
    }

    async fn nonce(&mut self, s: &Step) {
        let nonce = self.base + self.rng.below(4);
        let outcome = s
            .store
            .consume_nonce(&format!("nonce-m{nonce}"), "w")
            .await
            .unwrap();
        let fresh = self.model.spent.insert(nonce);
        let expected = if fresh {
            NonceOutcome::Spent
        } else {
            NonceOutcome::AlreadySpent
        };
        assert_eq!(outcome, expected, "{}: nonce {nonce}", s.at);
    }

    /// An answer and a cancel at once, from different handles where there
    /// are two: exactly one moves it, if any.
    async fn answer_beside_cancel(&mut self, s: &Step) {
        let (at, key) = (&s.at, s.key);
        let (a, c) = two(&self.stores, &mut self.rng);
        let value = format!("race{}", s.n);
        let (answered, cancelled) = tokio::join!(
            tokio::spawn({
                let (key, value) = (id(key), value.clone());
                async move { a.answer_interaction(answer(&key, &value, "bob")).await }
            }),
            tokio::spawn({
                let key = id(key);
                async move { c.cancel_interaction(&key, "w").await }
            }),
        );
        let (answered, cancelled) = (
            did(&answered.unwrap().unwrap()),
            did(&cancelled.unwrap().unwrap()),
        );
        let expected = self.model.transition(key);
        if expected == Did::Done {
            match (answered, cancelled) {
                (Did::Done, Did::AlreadyAnswered) => {
                    self.model.interactions.insert(key, State::Answered(value));
                }
                (Did::Gone, Did::Done) => {
                    self.model.interactions.insert(key, State::Cancelled);
                }
                other => panic!("{at}: race on {}: {other:?}", id(key)),
            }
        } else {
            assert_eq!((answered, cancelled), (expected, expected), "{at}: race");
        }
    }

    /// A tool approval of one of the seed's tool questions (created when
    /// it is not there yet); its key in the model and its id.
    async fn tool_question(&mut self, s: &Step) -> (usize, String) {
        let tkey = self.base + TOOL + self.rng.below(TOOLS);
        let tid = id(tkey);
        let mut new = tool_approval(&tid, "s-m");
        new.interaction.request.caller = Some(caller(self.base));
        match s.store.create_interaction(new).await.unwrap() {
            CreateOutcome::Created(_) => {
                self.model.interactions.insert(tkey, State::Pending);
            }
            CreateOutcome::Existing(_) => {}
            other => panic!("{}: create {tid}: {other:?}", s.at),
        }
        (tkey, tid)
    }

    /// A tool approval approved for the session (one of two conversations)
    /// or always: its grant commits with it. Many tool approvals, few
    /// grant keys: renewals are common.
    async fn approve_with_grant(&mut self, s: &Step) {
        let (tkey, tid) = self.tool_question(s).await;
        let gkey: GrantKey = match self.rng.below(3) {
            0 => ("always", None),
            n => ("session", Some(format!("conv-{n}"))),
        };
        let value = format!("t{}", s.n);
        let outcome = answer_tool_approval(
            &*s.store,
            answer(&tid, &value, "bob"),
            Some(NewGrant {
                grant: grant_for(self.base, &tid, &gkey),
                actor: "bob".into(),
            }),
        )
        .await;
        let expected = self.model.transition(tkey);
        assert_eq!(did(&outcome), expected, "{}: approve {tid}", s.at);
        if expected == Did::Done {
            self.model.interactions.insert(tkey, State::Answered(value));
            self.model.grants.insert(gkey, tid);
        }
        let in_force = grants_in_force(&s.store, self.base).await;
        assert_eq!(in_force, self.model.grants, "{}: grants in force", s.at);
    }

    /// Revoke a grant in force (found by its key), or one that is not.
    async fn revoke_grant(&mut self, s: &Step) {
        let (at, base) = (&s.at, self.base);
        let in_force = grants_of(&s.store, base).await;
        let keys: Vec<GrantKey> = self.model.grants.keys().cloned().collect();
        if keys.is_empty() {
            let gone = s
                .store
                .revoke_grant(&format!("gr_none{base}"), "admin")
                .await
                .unwrap();
            assert!(gone.is_none(), "{at}: revoked a grant that never was");
            return;
        }
        let gkey = keys[self.rng.below(keys.len())].clone();
        let grant = in_force
            .get(&gkey)
            .unwrap_or_else(|| panic!("{at}: grant {gkey:?} not in force"));
        let revoked = s.store.revoke_grant(&grant.id, "admin").await.unwrap();
        assert!(revoked.is_some(), "{at}: revoke {}", grant.id);
        assert!(
            s.store
                .revoke_grant(&grant.id, "admin")
                .await
                .unwrap()
                .is_none(),
            "{at}: revoked twice"
        );
        self.model.grants.remove(&gkey);
    }

    /// One tool approval approved twice at once, from two handles, each
    /// with its grant: one approval and one grant commit.
    async fn approve_twice_at_once(&mut self, s: &Step) {
        let (at, step, base) = (&s.at, s.n, self.base);
        let tkey = base + TOOL + self.rng.below(TOOLS);
        let tid = id(tkey);
        let mut new = tool_approval(&tid, "s-m");
        new.interaction.request.caller = Some(caller(base));
        if let CreateOutcome::Created(_) = s.store.create_interaction(new).await.unwrap() {
            self.model.interactions.insert(tkey, State::Pending);
        }
        let gkey: GrantKey = ("session", Some(format!("conv-{}", 1 + self.rng.below(2))));
        let (x, y) = two(&self.stores, &mut self.rng);
        let approve = |s: Arc<dyn Store>, value: String| {
            let (tid, gkey) = (tid.clone(), gkey.clone());
            tokio::spawn(async move {
                answer_tool_approval(
                    &*s,
                    answer(&tid, &value, "bob"),
                    Some(NewGrant {
                        grant: grant_for(base, &tid, &gkey),
                        actor: "bob".into(),
                    }),
                )
                .await
            })
        };
        let (first, second) = tokio::join!(
            approve(x, format!("x{step}")),
            approve(y, format!("y{step}"))
        );
        let (first, second) = (first.unwrap(), second.unwrap());
        let expected = self.model.transition(tkey);
        if expected == Did::Done {
            let winner = match (did(&first), did(&second)) {
                (Did::Done, Did::AlreadyAnswered) => format!("x{step}"),
                (Did::AlreadyAnswered, Did::Done) => format!("y{step}"),
                other => panic!("{at}: two approvals of {tid}: {other:?}"),
            };
            self.model
                .interactions
                .insert(tkey, State::Answered(winner));
            self.model.grants.insert(gkey, tid.clone());
        } else {
            assert_eq!((did(&first), did(&second)), (expected, expected), "{at}");
        }
        let in_force = grants_in_force(&s.store, base).await;
        assert_eq!(
            in_force, self.model.grants,
            "{at}: grants after two approvals"
        );
    }

    /// The final state, read back, is the model's.
    async fn check_final(&self) {
        let (seed, base, model) = (self.seed, self.base, &self.model);
        let store = &self.stores[0];
        let in_force = grants_in_force(store, base).await;
        if tracing() {
            eprintln!(
                "seed {seed}: grants in force {in_force:?}, model {:?}",
                model.grants
            );
        }
        assert_eq!(in_force, model.grants, "seed {seed}: grants in force");
        for k in (base..base + IDS).chain(base + TOOL..base + TOOL + TOOLS) {
            let view = store.get_interaction(&id(k)).await.unwrap();
            match (model.interactions.get(&k), view) {
                (None, None) => {}
                (Some(state), Some(view)) => {
                    let (status, value) = match state {
                        State::Pending => (InteractionStatus::Pending, None),
                        State::Answered(v) => (InteractionStatus::Answered, Some(v.as_str())),
                        State::Expired => (InteractionStatus::Expired, None),
                        State::Cancelled => (InteractionStatus::Cancelled, None),
                    };
                    assert_eq!(view.request.status, status, "seed {seed}: {}", id(k));
                    assert_eq!(
                        view.response.as_ref().and_then(|r| r.value.as_deref()),
                        value,
                        "seed {seed}: {}",
                        id(k)
                    );
                }
                (state, view) => {
                    panic!("seed {seed}: {}: model {state:?}, store {view:?}", id(k))
                }
            }
        }
    }
}
