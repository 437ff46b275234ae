//! The `lev serve` children of one bench run: started on temporary data
//! dirs (or replicas on one PostgreSQL database), killed when dropped, and
//! what is read of them from `/proc` (resident memory, open files).

use anyhow::{Context as _, bail};
use lev_client::Client;
use lev_protocol::api::{Role, TokenCreate};

use super::spawned::Spawned;

/// `lev serve` on temporary data dirs and port 0, killed when dropped:
/// one on SQLite, or `--replicas` on one PostgreSQL database.
pub(crate) struct Servers {
    children: Vec<Spawned>,
    pub(crate) urls: Vec<String>,
    pub(crate) admin_token: String,
    /// Token names get it, so that a bench may run again on one database.
    suffix: String,
    postgres: bool,
    /// The database they share, if any.
    pub(crate) database: Option<String>,
    _data: tempfile::TempDir,
}

impl Servers {
    pub(crate) async fn start(
        policy: Option<&str>,
        database: Option<&str>,
        replicas: usize,
        kek: Option<std::path::PathBuf>,
    ) -> anyhow::Result<Self> {
        let data = tempfile::Builder::new()
            .prefix("lev-bench-")
            .tempdir()
            .context("making a temporary data dir")?;
        let exe = std::env::current_exe().context("finding the lev binary")?;
        let suffix = format!(
            "{:x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis()
        );
        let kek = match kek {
            Some(file) => file,
            None => {
                let file = data.path().join("kek");
                if database.is_some() {
                    let key = lev_server::Kek::generate_base64().map_err(anyhow::Error::msg)?;
                    std::fs::write(&file, key).context("writing the key-encryption key")?;
                }
                file
            }
        };
        let mut children = Vec::new();
        for r in 0..replicas {
            let dir = data.path().join(format!("replica-{r}"));
            std::fs::create_dir_all(&dir).context("making a data dir")?;
            if let Some(policy) = policy {
                std::fs::write(dir.join("policy.toml"), policy)
                    .context("writing the bench policy")?;
            }
            // Every load generator connects from this one address: the
            // per-address cap is the whole cap here (lowered by lev serve to
            // fit the open-file limit).
            let mut builder = Spawned::builder(&exe, &dir).args([
                "--max-connections",
                "1000000",
                "--max-connections-per-address",
                "1000000",
            ]);
            if let Some(url) = database {
                builder = builder
                    .args(["--database", url, "--key-encryption-key-file"])
                    .arg(&kek);
            }
            children.push(builder.start().with_context(|| {
                if database.is_some() {
                    format!(
                        "starting replica {r} (a database an earlier bench used needs that \
                         run's --key-encryption-key-file)"
                    )
                } else {
                    "starting lev serve".to_owned()
                }
            })?);
        }
        let urls = children.iter().map(|c| c.url().to_owned()).collect();
        // On a database used before, no replica made an admin token: the
        // bench writes its own into the database.
        let admin_token = match (children.iter().find_map(|c| c.admin_token().ok()), database) {
            (Some(token), _) => token,
            (None, Some(url)) => {
                lev_server::create_token_in_database(
                    url,
                    TokenCreate {
                        name: format!("bench-admin-{suffix}"),
                        role: Role::Admin,
                        caller: None,
                        sessions: None,
                    },
                )
                .await
                .map_err(anyhow::Error::msg)?
                .token
            }
            (None, None) => bail!("the server wrote no admin token"),
        };
        Ok(Self {
            children,
            urls,
            admin_token,
            suffix,
            postgres: database.is_some(),
            database: database.map(str::to_owned),
            _data: data,
        })
    }

    /// A token name of this run.
    pub(crate) fn name(&self, base: &str) -> String {
        if self.postgres {
            format!("{base}-{}", self.suffix)
        } else {
            base.to_owned()
        }
    }

    /// `client`'s token, against replica `n` (modulo their number).
    pub(crate) fn on(&self, client: &Client, n: usize) -> anyhow::Result<Client> {
        Ok(Client::new(
            &self.urls[n % self.urls.len()],
            client.token().map(str::to_owned),
        )?)
    }

    /// ", 2 replicas on PostgreSQL", or nothing for one server on SQLite.
    pub(crate) fn describe(&self) -> String {
        match (self.postgres, self.urls.len()) {
            (false, _) => String::new(),
            (true, 1) => ", 1 server on PostgreSQL".into(),
            (true, n) => format!(", {n} replicas on PostgreSQL"),
        }
    }

    /// The servers' process ids.
    pub(crate) fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.children.iter().map(Spawned::pid)
    }

    /// Start measuring a window at `at`: CPU of the servers (and of
    /// PostgreSQL), committed transactions; [`Self::cost`] ends it.
    pub(crate) fn meter_at(
        &self,
        at: tokio::time::Instant,
    ) -> tokio::task::JoinHandle<super::meter::Reading> {
        let pids: Vec<u32> = self.pids().collect();
        let database = self.database.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            super::meter::read(&pids, database.as_deref()).await
        })
    }

    /// What the window since `start` cost, per each of `n` operations.
    pub(crate) async fn cost(&self, start: &super::meter::Reading, n: usize, what: &str) -> String {
        let pids: Vec<u32> = self.pids().collect();
        super::meter::report(start, &pids, self.database.as_deref(), n, what).await
    }

    /// The servers' resident memory, summed.
    pub(crate) fn rss_kib(&self) -> Option<u64> {
        self.sum("VmRSS:")
    }

    pub(crate) fn peak_rss_kib(&self) -> Option<u64> {
        self.sum("VmHWM:")
    }

    /// Open file descriptors of every server, summed.
    pub(crate) fn open_files(&self) -> u64 {
        self.children
            .iter()
            .filter_map(|c| std::fs::read_dir(format!("/proc/{}/fd", c.pid())).ok())
            .map(|d| d.count() as u64)
            .sum()
    }

    fn sum(&self, field: &str) -> Option<u64> {
        self.children
            .iter()
            .map(|c| status_field(c.pid(), field))
            .sum()
    }
}

fn status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}
