//! A Ballista cluster of separate network hosts on one machine: each host a Linux network
//! namespace on a bridge (`partout_testkit::netns`), so that every shuffle read between
//! executors, and every result the client fetches, crosses a link that can be shaped, cut and
//! counted.
//!
//! ```text
//!   host 0  10.213.0.10  the client (a thread of this process that entered the namespace)
//!   host 1  10.213.0.11  the scheduler: partout-ballista-scheduler's (Ballista 55's with the
//!                        fix for a lost executor), a thread of this process with its own
//!                        runtime, or its binary (`Options::scheduler_bin`)
//!   host 2+ 10.213.0.12+ one `partout-ballista-executor` process each (`ip netns exec`)
//! ```
//!
//! Executors bind 0.0.0.0 inside their own namespace and advertise its address, so that the
//! scheduler hands that address to the other executors (shuffle reads, Ballista's block
//! transport: the shuffle files' bytes as written) and to the client (final results).
//! Dropping the cluster kills the executors, stops the scheduler and removes every namespace
//! and link; a run killed before its drop is swept by the next one.
//!
//! Shared by the cluster tests and the benchmark (`examples/ballista_bench.rs`), included by `#[path]`.

use ballista_core::config::{BALLISTA_SHUFFLE_COMPRESSION_CODEC, TaskSchedulingPolicy};
use ballista_core::execution_plans::sort_shuffle::SortShuffleWriterExec;
use ballista_core::extension::SessionConfigExt;
use datafusion::physical_plan::Partitioning;
use datafusion::physical_plan::metrics::MetricValue;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use partout_ballista_scheduler::cluster::{BallistaCluster, JobState};
use partout_ballista_scheduler::config::SchedulerConfig;
use partout_ballista_scheduler::scheduler_process::{
    create_scheduler, start_grpc_service_with_listener,
};
use partout_ballista_scheduler::scheduler_server::SchedulerServer;
use partout_ballista_scheduler::state::execution_stage::ExecutionStage;
use partout_testkit::netns;
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The scheduler's server (its state: jobs, stages, running tasks).
pub type Scheduler = SchedulerServer<LogicalPlanNode, PhysicalPlanNode>;

/// The client's host.
pub const CLIENT: usize = 0;
/// The scheduler's host.
pub const SCHEDULER: usize = 1;
/// The first executor's host: executor `i` is host `FIRST_EXECUTOR + i`.
pub const FIRST_EXECUTOR: usize = 2;
/// The scheduler's port (each host has its own port space: fixed ports do not clash).
pub const SCHEDULER_PORT: u16 = 50050;
/// The executors' ports: Flight, gRPC, health.
const EXECUTOR_PORTS: [u16; 3] = [50051, 50052, 50053];
/// Bound on the executors' registering with the scheduler.
const REGISTER_WITHIN: Duration = Duration::from_secs(60);

/// Who writes the executors' hash shuffles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// partout's engine (`PartoutEngine`).
    Partout,
    /// Ballista's own sort-shuffle writer.
    Ballista,
}

impl Writer {
    /// The executor's `--shuffle-writer` value.
    pub fn flag(self) -> &'static str {
        match self {
            Writer::Partout => "partout",
            Writer::Ballista => "ballista",
        }
    }
}

/// How the cluster is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// Namespace names' prefix (1 to 5 characters `[a-z0-9]`).
    pub prefix: &'static str,
    /// Executor processes.
    pub executors: usize,
    /// Who writes hash shuffles.
    pub writer: Writer,
    /// Silence after which the scheduler declares an executor lost (seconds).
    pub executor_timeout: u64,
    /// Seconds after a job's end at which the executors remove its shuffle files.
    pub clean_up_after: u64,
    /// Every host's link rate (`tc` syntax: `1gbit`), or unlimited.
    pub link: Option<String>,
    /// Task slots per executor.
    pub vcores: usize,
    /// The executor binary (`CARGO_BIN_EXE_partout-ballista-executor` in tests).
    pub executor_bin: PathBuf,
    /// The scheduler's binary (`partout-ballista-scheduler`), run as a process in its host;
    /// `None`: the same scheduler in a thread of this process, whose state the tests read.
    pub scheduler_bin: Option<PathBuf>,
}

/// The cluster: hosts, scheduler, executors. Fields drop in order: executors first, then the
/// scheduler, then the namespaces.
pub struct NetCluster {
    executors: Vec<Option<Child>>,
    /// Executor `i`'s id now: `executor-{i}`, then `executor-{i}-{k}` after its k-th restart
    /// (the scheduler does not take back an id it has declared lost).
    ids: Vec<String>,
    scheduler: SchedulerHost,
    /// The namespaces, links and bridge.
    pub net: netns::Cluster,
    /// The executors' work directories, `work/executor-{i}`, and their logs.
    pub work: tempfile::TempDir,
    options: Options,
}

impl Drop for NetCluster {
    /// Kills and reaps the executors before the namespaces go (the fields' drops follow).
    fn drop(&mut self) {
        for i in 0..self.executors.len() {
            self.kill_executor(i);
        }
    }
}

/// The scheduler, in its host: a thread of this process or a process of its own.
enum SchedulerHost {
    Thread(SchedulerThread),
    Process(Child),
}

impl Drop for SchedulerHost {
    fn drop(&mut self) {
        if let SchedulerHost::Process(child) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The scheduler's thread, inside its host's namespace.
struct SchedulerThread {
    server: Scheduler,
    jobs: Arc<dyn JobState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SchedulerThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl NetCluster {
    /// Makes the hosts, starts the scheduler and the executors, and waits (bounded) until
    /// every executor has registered. Fails with `netns`'s message when this process cannot
    /// make namespaces (not root).
    pub fn start(options: Options) -> Result<Self, String> {
        let net = netns::Cluster::new(options.prefix, FIRST_EXECUTOR + options.executors)
            .map_err(|e| e.to_string())?;
        if let Some(rate) = &options.link {
            for host in 0..FIRST_EXECUTOR + options.executors {
                net.shape(host, rate).map_err(|e| e.to_string())?;
            }
        }
        let work = tempfile::tempdir().map_err(|e| e.to_string())?;
        let scheduler = match &options.scheduler_bin {
            None => SchedulerHost::Thread(SchedulerThread::start(
                net.namespace(SCHEDULER).to_string(),
                net.addr(SCHEDULER),
                options.executor_timeout,
                options.clean_up_after,
            )?),
            Some(bin) => SchedulerHost::Process(spawn_scheduler(&net, bin, &options, &work)?),
        };
        let mut cluster = NetCluster {
            executors: Vec::new(),
            ids: (0..options.executors).map(executor_id).collect(),
            scheduler,
            net,
            work,
            options,
        };
        for i in 0..cluster.options.executors {
            let child = cluster.spawn_executor(i)?;
            cluster.executors.push(Some(child));
        }
        cluster.wait_registered()?;
        Ok(cluster)
    }

    /// Executor `i`'s id now.
    pub fn id_of(&self, i: usize) -> &str {
        &self.ids[i]
    }

    /// Kills executor `i` if it still runs, starts it again under a new id (in the same host,
    /// with the same work directory), and waits (bounded) until it has registered.
    pub fn restart_executor(&mut self, i: usize) -> Result<(), String> {
        self.kill_executor(i);
        let restarts = self.ids[i].matches('-').count();
        self.ids[i] = format!("{}-{restarts}", executor_id(i));
        let child = self.spawn_executor(i)?;
        self.executors[i] = Some(child);
        self.wait_registered()
    }

    fn spawn_executor(&self, i: usize) -> Result<Child, String> {
        let dir = self.work_dir(i);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        // Appended: a restarted executor's log follows its earlier life's.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.work.path().join(format!("executor-{i}.log")))
            .map_err(|e| e.to_string())?;
        let host = FIRST_EXECUTOR + i;
        let text = |v: &dyn ToString| v.to_string();
        let args: Vec<String> = vec![
            "--id".into(),
            self.ids[i].clone(),
            "--scheduler-host".into(),
            text(&self.net.addr(SCHEDULER)),
            "--scheduler-port".into(),
            text(&SCHEDULER_PORT),
            "--bind-host".into(),
            "0.0.0.0".into(),
            "--external-host".into(),
            text(&self.net.addr(host)),
            "--bind-port".into(),
            text(&EXECUTOR_PORTS[0]),
            "--bind-grpc-port".into(),
            text(&EXECUTOR_PORTS[1]),
            "--bind-health-port".into(),
            text(&EXECUTOR_PORTS[2]),
            "--work-dir".into(),
            dir.to_str().unwrap().into(),
            "--task-scheduling-policy".into(),
            "pull-staged".into(),
            "--executor-heartbeat-interval-seconds".into(),
            "1".into(),
            // Tried for a while, not once: a host whose link was just set up again (after a
            // cut) may not reach the scheduler at its first attempt.
            "--scheduler-connect-timeout-seconds".into(),
            "30".into(),
            "--vcores".into(),
            text(&self.options.vcores),
            "--memory-pool-size".into(),
            "1GB".into(),
            "--log-level-setting".into(),
            "WARN".into(),
            "--shuffle-writer".into(),
            self.options.writer.flag().into(),
        ];
        self.net
            .command(host, &self.options.executor_bin, &args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start executor {i}: {e}"))
    }

    fn wait_registered(&self) -> Result<(), String> {
        let deadline = Instant::now() + REGISTER_WITHIN;
        let SchedulerHost::Thread(scheduler) = &self.scheduler else {
            // A scheduler process: its state is its own. A job submitted before the executors
            // register waits for their first poll.
            return Ok(());
        };
        loop {
            let missing: Vec<&String> = self
                .ids
                .iter()
                .filter(|id| {
                    scheduler
                        .server
                        .state
                        .executor_manager
                        .get_executor_hearbeat(id)
                        .is_none()
                })
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let logs: Vec<String> = (0..self.ids.len())
                    .filter(|&i| missing.contains(&&self.ids[i]))
                    .map(|i| format!("executor {i}'s log ends:\n{}", self.log_tail(i)))
                    .collect();
                return Err(format!(
                    "executors {missing:?} did not register within {REGISTER_WITHIN:?}\n{}",
                    logs.join("\n")
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of executor `i`'s log.
    fn log_tail(&self, i: usize) -> String {
        let text = std::fs::read_to_string(self.work.path().join(format!("executor-{i}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Executor `i`'s work directory.
    pub fn work_dir(&self, i: usize) -> PathBuf {
        self.work.path().join(format!("executor-{i}"))
    }

    /// Executor `i`'s host.
    pub fn host_of(i: usize) -> usize {
        FIRST_EXECUTOR + i
    }

    /// The scheduler's server, to look into its state (a scheduler in this process only).
    pub fn scheduler(&self) -> &Scheduler {
        &self.thread().server
    }

    fn thread(&self) -> &SchedulerThread {
        match &self.scheduler {
            SchedulerHost::Thread(thread) => thread,
            SchedulerHost::Process(_) => {
                panic!("the scheduler runs as a process: its state is not this process's")
            }
        }
    }

    /// The scheduler's address, as a client connects to it (`df://…`).
    pub fn url(&self) -> String {
        format!("df://{}:{SCHEDULER_PORT}", self.net.addr(SCHEDULER))
    }

    /// Runs `body` as the client: on a thread of its own inside the client's host, on a
    /// runtime built there (so every socket it opens crosses the client's link).
    pub fn client<T, F, Fut>(&self, body: F) -> T
    where
        T: Send,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = T>,
    {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    self.net.enter(CLIENT).unwrap();
                    tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(body())
                })
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Kills executor `i` (SIGKILL) and reaps it.
    pub fn kill_executor(&mut self, i: usize) {
        if let Some(mut child) = self.executors[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to executor `i`.
    pub fn signal_executor(&self, i: usize, signal: &str) {
        let Some(child) = &self.executors[i] else {
            return;
        };
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Bytes sent by every host, summed: each frame that crossed the bridge, counted once.
    pub fn wire_bytes(&self) -> u64 {
        (0..FIRST_EXECUTOR + self.options.executors)
            .map(|host| self.net.bytes(host).map(|(sent, _)| sent).unwrap_or(0))
            .sum()
    }

    /// Bytes sent by executor `i`'s host.
    pub fn sent_by_executor(&self, i: usize) -> u64 {
        self.net
            .bytes(Self::host_of(i))
            .map(|(sent, _)| sent)
            .unwrap_or(0)
    }

    /// Every job the scheduler knows of (running and finished).
    pub async fn jobs(&self) -> HashSet<String> {
        self.thread()
            .jobs
            .get_all_jobs()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|j| j.to_string())
            .collect()
    }

    /// The shuffle stages of a finished job: who wrote each, with which codec, and what.
    pub async fn stages(&self, job: &str) -> Vec<StageReport> {
        let Some(job_id) = self
            .thread()
            .jobs
            .get_all_jobs()
            .await
            .unwrap_or_default()
            .into_iter()
            .find(|j| j.to_string() == job)
        else {
            return Vec::new();
        };
        let Ok(Some(graph)) = self.thread().jobs.get_execution_graph(&job_id).await else {
            return Vec::new();
        };
        let files = self.shuffle_file_bytes(job);
        let mut reports = Vec::new();
        for (id, stage) in graph.stages() {
            let ExecutionStage::Successful(stage) = stage else {
                continue;
            };
            // Ballista 55 writes hash shuffles with its sort-shuffle writer (and range
            // shuffles with another): the stages partout's engine takes.
            let hash = stage
                .plan
                .downcast_ref::<SortShuffleWriterExec>()
                .is_some_and(|w| matches!(w.shuffle_output_partitioning(), Partitioning::Hash(..)));
            let metric = |name: &str| -> Option<u64> {
                let set = stage.stage_metrics.first()?;
                let mut total = None;
                for m in set.iter() {
                    let value = match m.value() {
                        MetricValue::Count { name: n, count } if n == name => count.value(),
                        MetricValue::OutputRows(c) if name == "output_rows" => c.value(),
                        MetricValue::Time { name: n, time } if n == name => time.value(),
                        _ => continue,
                    };
                    *total.get_or_insert(0) += value as u64;
                }
                total
            };
            let codec = stage
                .session_config
                .ballista_config()
                .settings()
                .get(BALLISTA_SHUFFLE_COMPRESSION_CODEC)
                .cloned()
                .unwrap_or_else(|| "default".into());
            reports.push(StageReport {
                stage: *id,
                hash,
                partout_bytes: metric(partout_ballista::FILE_BYTES_METRIC),
                file_bytes: files.get(id).copied().unwrap_or(0),
                rows: metric("output_rows").unwrap_or(0),
                write_nanos: metric("write_time").unwrap_or(0),
                codec,
            });
        }
        reports.sort_by_key(|r| r.stage);
        reports
    }

    /// Bytes of the shuffle files of `job` on every executor, by stage.
    fn shuffle_file_bytes(&self, job: &str) -> BTreeMap<usize, u64> {
        let mut bytes = BTreeMap::new();
        for i in 0..self.options.executors {
            let root = self.work_dir(i).join(job);
            let Ok(stages) = std::fs::read_dir(&root) else {
                continue;
            };
            for stage in stages.flatten() {
                let Some(id) = stage.file_name().to_str().and_then(|s| s.parse().ok()) else {
                    continue;
                };
                *bytes.entry(id).or_insert(0) += data_bytes(&stage.path());
            }
        }
        bytes
    }
}

/// One shuffle stage of a finished job.
#[derive(Clone, Debug)]
pub struct StageReport {
    /// The stage's id.
    pub stage: usize,
    /// Whether its output is hash partitioned (the stages partout writes).
    pub hash: bool,
    /// The stage's file bytes as partout's engine reported them, when partout wrote it.
    pub partout_bytes: Option<u64>,
    /// Bytes of its data files found on the executors (left until the job's clean-up).
    pub file_bytes: u64,
    /// Rows written.
    pub rows: u64,
    /// Time spent writing, summed over its tasks' inputs (nanoseconds).
    pub write_nanos: u64,
    /// The session's `ballista.shuffle.compression.codec`.
    pub codec: String,
}

impl SchedulerThread {
    fn start(
        namespace: String,
        addr: Ipv4Addr,
        executor_timeout: u64,
        clean_up_after: u64,
    ) -> Result<Self, String> {
        let (ready, started) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("scheduler".into())
            .spawn(move || {
                let ready = &ready;
                let fail = move |e: String| {
                    let _ = ready.send(Err(e));
                };
                if let Err(e) = netns::enter(&namespace) {
                    return fail(e.to_string());
                }
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("scheduler")
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => return fail(e.to_string()),
                };
                runtime.block_on(async {
                    let listener = match tokio::net::TcpListener::bind((addr, SCHEDULER_PORT)).await
                    {
                        Ok(listener) => listener,
                        Err(e) => return fail(format!("scheduler: bind {addr}: {e}")),
                    };
                    let mut config = SchedulerConfig::default()
                        .with_scheduler_policy(TaskSchedulingPolicy::PullStaged)
                        .with_hostname(addr.to_string())
                        .with_port(SCHEDULER_PORT)
                        .with_finished_job_data_clean_up_interval_seconds(clean_up_after);
                    config.bind_host = addr.to_string();
                    config.executor_timeout_seconds = executor_timeout;
                    config.expire_dead_executor_interval_seconds = 1;
                    let cluster = match BallistaCluster::new_from_config(&config).await {
                        Ok(cluster) => cluster,
                        Err(e) => return fail(e.to_string()),
                    };
                    let jobs = cluster.job_state();
                    let server: Scheduler = match create_scheduler(cluster, Arc::new(config)).await
                    {
                        Ok(server) => server,
                        Err(e) => return fail(e.to_string()),
                    };
                    tokio::spawn(start_grpc_service_with_listener(listener, server.clone()));
                    let _ = ready.send(Ok((server, jobs)));
                    let _ = stopped.await;
                });
                runtime.shutdown_timeout(Duration::from_secs(2));
            })
            .map_err(|e| e.to_string())?;
        match started.recv() {
            Ok(Ok((server, jobs))) => Ok(SchedulerThread {
                server,
                jobs,
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("the scheduler's thread ended before it started".into()),
        }
    }
}

/// The scheduler's binary in its host, with the flags the thread's scheduler is given, its
/// log in `work/scheduler.log`.
fn spawn_scheduler(
    net: &netns::Cluster,
    bin: &Path,
    options: &Options,
    work: &tempfile::TempDir,
) -> Result<Child, String> {
    let log =
        std::fs::File::create(work.path().join("scheduler.log")).map_err(|e| e.to_string())?;
    let addr = net.addr(SCHEDULER).to_string();
    let args: Vec<String> = vec![
        "--bind-host".into(),
        addr.clone(),
        "--external-host".into(),
        addr,
        "--bind-port".into(),
        SCHEDULER_PORT.to_string(),
        "--scheduler-policy".into(),
        "pull-staged".into(),
        "--executor-timeout-seconds".into(),
        options.executor_timeout.to_string(),
        "--expire-dead-executor-interval-seconds".into(),
        "1".into(),
        "--finished-job-data-clean-up-interval-seconds".into(),
        options.clean_up_after.to_string(),
        "--log-level-setting".into(),
        "WARN".into(),
    ];
    let child = net
        .command(SCHEDULER, bin, &args)
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start the scheduler {}: {e}", bin.display()))?;
    // Bounded: the scheduler's port accepts connections (from its own host).
    let deadline = Instant::now() + REGISTER_WITHIN;
    let probe = [
        "-c",
        &format!("exec 3<>/dev/tcp/{}/{SCHEDULER_PORT}", net.addr(SCHEDULER)),
    ];
    while Instant::now() < deadline {
        let up = net
            .command(SCHEDULER, "bash", probe)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if up {
            return Ok(child);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "the scheduler did not listen on {SCHEDULER_PORT} within {REGISTER_WITHIN:?}; its log: {}",
        work.path().join("scheduler.log").display()
    ))
}

/// Executor `i`'s id.
pub fn executor_id(i: usize) -> String {
    format!("executor-{i}")
}

/// Bytes of the data files under `dir`.
fn data_bytes(dir: &Path) -> u64 {
    data_files(dir)
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum()
}

/// Shuffle data files under `dir`: `{job}/{stage}/{task}/data.arrow` (hash shuffles) and
/// `{job}/{stage}/{partition}/data-{task}.arrow` (Ballista's other stages).
pub fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("data") && n.ends_with(".arrow"))
            {
                found.push(path);
            }
        }
    }
    found
}
