//! A virtual cluster of network hosts for tests: Linux network namespaces joined by a bridge.
//!
//! ```text
//!            root namespace                      switch namespace "{tag}-sw"
//!   ┌──────────────────────────────┐   ┌───────────────────────────────────────────┐
//!   │ test process (client)        │   │                 br0 (no address)           │
//!   │  {tag} 10.213.0.2/24 ────────┼───┼─ root ──┐   ┌───┴────┬──────────┐         │
//!   │  (only with a client link)   │   │         └───┤  h0    h1   ...    hN-1      │
//!   └──────────────────────────────┘   └─────────────┼───┼─────┼──────────┼─────────┘
//!                                                     veth pairs (bridge side hK)
//!                     host namespaces "{tag}-h0" ... : eth0 10.213.0.(10+k)/24, lo
//! ```
//!
//! - [`Cluster::new`] makes the switch namespace with the bridge, and one namespace per host,
//!   each joined to the bridge by a veth pair (`eth0` in the host, `hK` on the bridge), with
//!   `lo` up and `eth0` at 10.213.0.(10+k)/24. Nothing is added to the root namespace.
//! - [`Cluster::with_client_link`] also joins the root namespace to the bridge (veth `{tag}`,
//!   10.213.0.2/24), so that the test process itself can reach the hosts. That adds exactly
//!   one route to the root namespace, the connected route for 10.213.0.0/24 on `{tag}`, which
//!   goes away with the link when the cluster is dropped. Only one cluster at a time on a
//!   machine may have a client link (their routes would clash); `with_client_link` fails if
//!   the root namespace already has a route for 10.213.0.0/24.
//! - [`Cluster::command`] runs a program in a host (`ip netns exec`), [`Cluster::enter`] moves
//!   the calling thread into a host (its sockets are made there), [`Cluster::addr`] is a
//!   host's address.
//! - [`Cluster::shape`] limits a host's link in both directions with `tbf`,
//!   [`Cluster::link_down`] cuts a host off; [`Cluster::bytes`] reads its byte counters.
//! - Dropping the cluster kills whatever still runs in its namespaces (SIGKILL), then removes
//!   its namespaces, links and bridge, ignoring errors. A run killed before its drop leaves
//!   them behind: [`Cluster::sweep`], called by every `new`, removes the leftovers of a prefix
//!   whose process is gone.
//!
//! Why a switch namespace rather than a bridge in the root namespace: the root namespace keeps
//! no trace of a cluster without a client link (no bridge, no route, no interface), clusters
//! can run side by side (each has its own bridge and the same addresses), and the bridge's
//! frames do not go through the root namespace's firewall: with `br_netfilter` loaded (as on
//! most Docker hosts, `net.bridge.bridge-nf-call-iptables = 1`), bridged IPv4 frames are
//! passed to the iptables of the bridge's namespace, whose FORWARD chain may drop them
//! (Docker's policy is DROP). The switch namespace has no rules.
//!
//! Processes: `ip netns delete` does not kill the processes in a namespace, and a namespace
//! with a process in it lives on (with its interfaces) after its name is removed. The caller
//! should stop its own children first (kill and wait for its [`std::process::Child`]ren, so
//! that none is left a zombie); [`Cluster::pids`] and [`Cluster::kill_all`] help, and the drop
//! kills (without reaping) whatever is left.
//!
//! Needs root (precisely `CAP_SYS_ADMIN` and `CAP_NET_ADMIN`) and iproute2 (`ip`, and `tc`
//! with the `tbf` qdisc for shaping); without them `new` returns an error that says so.
//!
//! Names: `{tag}` is `{prefix}-{pid:x}-{n:x}` (prefix of 1 to 5 characters `[a-z0-9]`, this
//! process's id and a counter in hexadecimal), at most 15 characters as Linux's interface
//! names must be; the namespaces are `{tag}-sw` and `{tag}-h{k}`.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// The network of every cluster: used only inside the clusters' namespaces (and on the root
/// namespace's client link, while one exists).
pub const NETWORK: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 0);
/// Prefix length of [`NETWORK`].
pub const PREFIX_LEN: u8 = 24;
/// The root namespace's address on a client link.
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);
/// The last octet of host 0's address; host `k` has `FIRST_HOST + k`.
const FIRST_HOST: u8 = 10;
/// Most hosts in a cluster (10.213.0.10 to 10.213.0.249).
pub const MAX_HOSTS: usize = 240;
/// Longest prefix: `{prefix}-{pid:x}-{n:x}` must fit Linux's 15 characters with a pid of up
/// to 6 hexadecimal digits (pids are below 2^22) and a counter of up to 2.
const MAX_PREFIX: usize = 5;
/// The bridge, inside the switch namespace.
const BRIDGE: &str = "br0";
/// A host's end of its veth pair, inside the host's namespace.
const HOST_IF: &str = "eth0";
/// The switch's end of the client link, inside the switch namespace.
const CLIENT_PEER: &str = "root";
/// Bound on waiting for the processes of a namespace to die after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Clusters made by this process (part of the names).
static COUNTER: AtomicU32 = AtomicU32::new(0);
/// Serialises `ip netns add` within this process: on its first use on a machine it makes
/// `/run/netns` a shared mount point, and two doing so at once may stack two mounts.
static NETNS_ADD: Mutex<()> = Mutex::new(());

/// A virtual cluster: a bridge in its own namespace and `hosts` namespaces joined to it. See
/// the [module documentation](self).
#[derive(Debug)]
pub struct Cluster {
    /// `{prefix}-{pid:x}-{n:x}`; also the root namespace's end of the client link.
    tag: String,
    /// The switch namespace.
    switch: String,
    /// The hosts' namespaces.
    hosts: Vec<String>,
    /// Whether the root namespace is joined to the bridge.
    client_link: bool,
}

impl Cluster {
    /// A cluster of `hosts` namespaces on one bridge, without a client link: the hosts reach
    /// one another, the test process reaches them only through [`Cluster::command`].
    ///
    /// Sweeps first the leftovers of `prefix` whose process is gone ([`Cluster::sweep`]).
    pub fn new(prefix: &str, hosts: usize) -> io::Result<Self> {
        Self::build(prefix, hosts, false)
    }

    /// As [`Cluster::new`], and the root namespace joined to the bridge at [`CLIENT_ADDR`] so
    /// that the test process reaches the hosts at their [`Cluster::addr`]. Adds to the root
    /// namespace one veth and its connected route for 10.213.0.0/24, removed on drop; fails
    /// if the root namespace already has a route for that network.
    pub fn with_client_link(prefix: &str, hosts: usize) -> io::Result<Self> {
        Self::build(prefix, hosts, true)
    }

    fn build(prefix: &str, hosts: usize, client_link: bool) -> io::Result<Self> {
        check_prefix(prefix)?;
        if hosts == 0 || hosts > MAX_HOSTS {
            return Err(invalid(format!(
                "a cluster has 1 to {MAX_HOSTS} hosts, not {hosts}"
            )));
        }
        check_privileges()?;
        Self::sweep(prefix)?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed) % 256;
        let tag = format!("{prefix}-{:x}-{n:x}", std::process::id());
        if client_link {
            let routes = run(Command::new("ip").args(["-4", "route", "show", &network()]))?;
            if !routes.trim().is_empty() {
                return Err(io::Error::other(format!(
                    "netns: cannot add a client link: the root namespace already has a route \
                     for {}: {} (another cluster with a client link, or a real network)",
                    network(),
                    routes.trim()
                )));
            }
        }
        // From here on, the drop removes whatever was made, should a step fail.
        let mut cluster = Self {
            switch: format!("{tag}-sw"),
            tag,
            hosts: Vec::with_capacity(hosts),
            client_link: false,
        };
        let sw = cluster.switch.clone();
        add_netns(&sw)?;
        ip(&["-n", &sw, "link", "set", "lo", "up"])?;
        ip(&["-n", &sw, "link", "add", BRIDGE, "type", "bridge"])?;
        ip(&["-n", &sw, "link", "set", BRIDGE, "up"])?;
        for k in 0..hosts {
            let ns = format!("{}-h{k}", cluster.tag);
            add_netns(&ns)?;
            cluster.hosts.push(ns.clone());
            let port = bridge_port(k);
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&[
                "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", HOST_IF, "netns",
                &ns,
            ])?;
            ip(&["-n", &sw, "link", "set", &port, "master", BRIDGE, "up"])?;
            let addr = format!("{}/{PREFIX_LEN}", cluster.addr(k));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", HOST_IF])?;
            ip(&["-n", &ns, "link", "set", HOST_IF, "up"])?;
        }
        if client_link {
            let tag = cluster.tag.clone();
            cluster.client_link = true;
            ip(&[
                "link",
                "add",
                &tag,
                "type",
                "veth",
                "peer",
                "name",
                CLIENT_PEER,
                "netns",
                &sw,
            ])?;
            ip(&[
                "-n",
                &sw,
                "link",
                "set",
                CLIENT_PEER,
                "master",
                BRIDGE,
                "up",
            ])?;
            // No IPv6 on the root's end: no router solicitations from the test's link.
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{tag}/disable_ipv6"), "1");
            let addr = format!("{CLIENT_ADDR}/{PREFIX_LEN}");
            ip(&["addr", "add", &addr, "dev", &tag])?;
            ip(&["link", "set", &tag, "up"])?;
        }
        Ok(cluster)
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// Host `host`'s address: 10.213.0.(10 + host).
    pub fn addr(&self, host: usize) -> Ipv4Addr {
        assert!(host < self.hosts.len(), "no host {host}");
        Ipv4Addr::new(10, 213, 0, FIRST_HOST + host as u8)
    }

    /// The root namespace's address on the client link, if the cluster has one.
    pub fn client_addr(&self) -> Option<Ipv4Addr> {
        self.client_link.then_some(CLIENT_ADDR)
    }

    /// Name of host `host`'s namespace (for `ip netns exec`, `ip -n`, `tc -n`).
    pub fn namespace(&self, host: usize) -> &str {
        &self.hosts[host]
    }

    /// Name of the switch namespace, which holds the bridge `br0` and the hosts' bridge ends
    /// `h0`, `h1`, ...
    pub fn switch_namespace(&self) -> &str {
        &self.switch
    }

    /// The root namespace's end of the client link, if the cluster has one.
    pub fn client_interface(&self) -> Option<&str> {
        self.client_link.then_some(self.tag.as_str())
    }

    /// A command running `program args...` in host `host`'s namespace
    /// (`ip netns exec NAMESPACE program args...`, which execs the program in place: the
    /// child's pid is the program's). The namespace's `/sys` shows its own interfaces.
    pub fn command<I, S>(&self, host: usize, program: impl AsRef<OsStr>, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", self.namespace(host)])
            .arg(program)
            .args(args);
        command
    }

    /// Limits host `host`'s link to `rate` (tc's syntax: `8mbit`, `100mbit`, `1gbit`, `500kbps`)
    /// in both directions: a `tbf` qdisc on the egress of the host's end (what it sends) and
    /// of the bridge's end (what it receives). Replaces an earlier shaping.
    pub fn shape(&self, host: usize, rate: &str) -> io::Result<()> {
        let bits = parse_rate(rate)?;
        let burst = tbf_burst(bits).to_string();
        for (ns, dev) in self.ends(host) {
            tc(&[
                "-n", ns, "qdisc", "replace", "dev", &dev, "root", "tbf", "rate", rate, "burst",
                &burst, "latency", "50ms",
            ])?;
        }
        Ok(())
    }

    /// Removes host `host`'s shaping (a no-op if there is none).
    pub fn unshape(&self, host: usize) -> io::Result<()> {
        for (ns, dev) in self.ends(host) {
            let out = Command::new("tc")
                .args(["-n", ns, "qdisc", "del", "dev", &dev, "root"])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| spawn_error("tc", e))?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            // Deleting the default qdisc: "Cannot delete qdisc with handle of zero" (or ENOENT).
            if !out.status.success()
                && !stderr.contains("handle of zero")
                && !stderr.contains("No such file")
            {
                return Err(io::Error::other(format!(
                    "tc -n {ns} qdisc del dev {dev} root: {}",
                    stderr.trim()
                )));
            }
        }
        Ok(())
    }

    /// Cuts host `host` off: its bridge end goes down (so its own end loses its carrier).
    /// Packets to and from it are dropped; connections stay open and resume after
    /// [`Cluster::link_up`] if their peers have not given up.
    pub fn link_down(&self, host: usize) -> io::Result<()> {
        ip(&[
            "-n",
            &self.switch,
            "link",
            "set",
            &bridge_port(host),
            "down",
        ])
        .map(drop)
    }

    /// Reconnects host `host` after [`Cluster::link_down`].
    pub fn link_up(&self, host: usize) -> io::Result<()> {
        ip(&["-n", &self.switch, "link", "set", &bridge_port(host), "up"]).map(drop)
    }

    /// Host `host`'s byte counters `(sent, received)`, from its veth: every byte of its
    /// Ethernet frames, on all protocols (ARP, IPv6 neighbour discovery), headers included.
    ///
    /// Read on the bridge's end of the pair, where what the host sends is received: the
    /// host's `tx_bytes` is the bridge end's `rx_bytes` and the other way round.
    pub fn bytes(&self, host: usize) -> io::Result<(u64, u64)> {
        let dir = format!("/sys/class/net/{}/statistics", bridge_port(host));
        let out = run(Command::new("ip").args([
            "netns",
            "exec",
            &self.switch,
            "cat",
            &format!("{dir}/rx_bytes"),
            &format!("{dir}/tx_bytes"),
        ]))?;
        let mut values = out.split_whitespace().map(str::parse::<u64>);
        match (values.next(), values.next()) {
            (Some(Ok(bridge_rx)), Some(Ok(bridge_tx))) => Ok((bridge_rx, bridge_tx)),
            _ => Err(io::Error::other(format!(
                "netns: unexpected counters in {dir}: {out:?}"
            ))),
        }
    }

    /// The processes in host `host`'s namespace (`ip netns pids`).
    pub fn pids(&self, host: usize) -> io::Result<Vec<u32>> {
        netns_pids(self.namespace(host))
    }

    /// Kills (SIGKILL) every process in host `host`'s namespace and waits, at most 5 s, until
    /// none is left. Does not reap: the caller's own [`std::process::Child`]ren still need a
    /// `wait`.
    pub fn kill_all(&self, host: usize) -> io::Result<()> {
        kill_netns(self.namespace(host))
    }

    /// Removes the namespaces and root links of `prefix` left by processes that are gone (a
    /// test run killed before its drop), killing the processes still inside them first.
    /// Leaves alone those of live processes (this one's included). Returns how many
    /// namespaces and links it removed.
    pub fn sweep(prefix: &str) -> io::Result<usize> {
        check_prefix(prefix)?;
        let mut removed = 0;
        let namespaces = run(Command::new("ip").args(["netns", "list"]))?;
        // Hosts first, the switch last: with its bridge go the hosts' veth pairs.
        let mut stale: Vec<&str> = namespaces
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .filter(|name| {
                name.rsplit_once('-')
                    .is_some_and(|(tag, _)| is_stale(prefix, tag))
            })
            .collect();
        stale.sort_by_key(|name| name.ends_with("-sw"));
        for name in stale {
            let _ = kill_netns(name);
            if ip(&["netns", "delete", name]).is_ok() {
                removed += 1;
            }
        }
        let links = run(Command::new("ip").args(["-o", "link", "show"]))?;
        for line in links.lines() {
            // "12: name@if11: <BROADCAST,...> ..."
            let Some(name) = line.split(": ").nth(1) else {
                continue;
            };
            let name = name.split('@').next().unwrap_or(name);
            if is_stale(prefix, name) && ip(&["link", "delete", name]).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Moves the calling thread into host `host`'s network namespace, for good: the sockets
    /// it makes from then on live there (bound at [`Cluster::addr`], reaching the other hosts
    /// through the bridge), and so do those of the threads it spawns afterwards (a tokio
    /// runtime built on it, with its workers). The process's other threads stay where they
    /// are. Only the network namespace changes; files, pids and mounts are shared as before.
    ///
    /// Call it on a thread of its own (a test's thread, or one spawned for a server): a thread
    /// cannot leave the namespace once the cluster is dropped.
    pub fn enter(&self, host: usize) -> io::Result<()> {
        enter(self.namespace(host))
    }

    /// The two ends of host `host`'s veth pair: (namespace, interface).
    fn ends(&self, host: usize) -> [(&str, String); 2] {
        [
            (self.namespace(host), HOST_IF.to_string()),
            (self.switch.as_str(), bridge_port(host)),
        ]
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for ns in self.hosts.iter().chain([&self.switch]) {
            let _ = kill_netns(ns);
        }
        if self.client_link {
            let _ = ip(&["link", "delete", &self.tag]);
        }
        for ns in &self.hosts {
            let _ = ip(&["netns", "delete", ns]);
        }
        let _ = ip(&["netns", "delete", &self.switch]);
    }
}

/// The bridge's end of host `host`'s veth pair, in the switch namespace.
fn bridge_port(host: usize) -> String {
    format!("h{host}")
}

/// "10.213.0.0/24".
fn network() -> String {
    format!("{NETWORK}/{PREFIX_LEN}")
}

/// The `burst` of a `tbf` at `bits` per second, in bytes: 5 ms at that rate, and at least
/// 128 KiB. The bucket must hold a whole TSO/GSO packet (up to 64 KiB on a veth): a packet
/// larger than the bucket is cut into segments by tbf, which costs CPU (at 10gbit, buckets
/// of 16 and 64 KiB gave 2.5 to 4 Gbit/s, 128 KiB and more 7.3 to 8.7, bound by 2 CPUs; see
/// NOTES.md). The 5 ms keep up with the time between two dequeues at high rates.
fn tbf_burst(bits: u64) -> u64 {
    (bits / 8 / 200).max(128 << 10)
}

/// A rate in tc's syntax, in bits per second.
fn parse_rate(rate: &str) -> io::Result<u64> {
    let lower = rate.trim().to_ascii_lowercase();
    let digits = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(digits);
    let number: f64 = number
        .parse()
        .map_err(|_| invalid(format!("netns: bad rate {rate:?}")))?;
    let factor = match unit {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        "tbps" => 8e12,
        _ => return Err(invalid(format!("netns: bad rate unit in {rate:?}"))),
    };
    let bits = number * factor;
    if bits.is_nan() || bits < 8.0 {
        return Err(invalid(format!("netns: rate {rate:?} is too low")));
    }
    Ok(bits as u64)
}

/// Whether `tag` is `{prefix}-{pid:x}-{n:x}` of a process that is gone.
fn is_stale(prefix: &str, tag: &str) -> bool {
    let Some(rest) = tag.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
        return false;
    };
    let Some((pid, n)) = rest.split_once('-') else {
        return false;
    };
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(pid) || !hex(n) {
        return false;
    }
    match u32::from_str_radix(pid, 16) {
        Ok(pid) => pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists(),
        Err(_) => false,
    }
}

fn check_prefix(prefix: &str) -> io::Result<()> {
    let ok = !prefix.is_empty()
        && prefix.len() <= MAX_PREFIX
        && prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "netns: prefix {prefix:?} must be 1 to {MAX_PREFIX} characters [a-z0-9] (interface \
             names have at most 15 characters)"
        )))
    }
}

/// What `new` needs, said when it is missing.
const NEEDS: &str = "netns::Cluster needs root (precisely CAP_SYS_ADMIN, to mount network \
                     namespaces under /run/netns, and CAP_NET_ADMIN, to configure links and \
                     qdiscs) and iproute2's `ip` and `tc` on PATH (Debian: apt-get install \
                     iproute2); run the test as root, e.g. `sudo -E cargo test`";

/// Fails unless this process has CAP_SYS_ADMIN and CAP_NET_ADMIN, and `ip` runs.
fn check_privileges() -> io::Result<()> {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or("?")
            .to_string()
    };
    let caps = u64::from_str_radix(&field("CapEff:"), 16).unwrap_or(0);
    let mut missing = String::new();
    for (bit, name) in [
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
    ] {
        if caps & (1 << bit) == 0 {
            let _ = write!(missing, " {name}");
        }
    }
    if !missing.is_empty() {
        let uid = field("Uid:");
        let euid = uid.split_whitespace().nth(1).unwrap_or("?");
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{NEEDS}; this process (euid {euid}) lacks{missing}"),
        ));
    }
    run(Command::new("ip").arg("-V")).map(drop)
}

/// `ip netns add NAME`, with a message saying what is needed if it fails.
fn add_netns(name: &str) -> io::Result<()> {
    let _guard = NETNS_ADD.lock().unwrap_or_else(|e| e.into_inner());
    ip(&["netns", "add", name])
        .map(drop)
        .map_err(|e| io::Error::new(e.kind(), format!("{e}; {NEEDS}")))
}

/// Moves the calling thread into the network namespace mounted at `/run/netns/{name}`
/// (`setns(CLONE_NEWNET)`), as [`Cluster::enter`] does for a host: for a thread that must
/// outlive a borrow of the cluster (a server's), given [`Cluster::namespace`].
pub fn enter(name: &str) -> io::Result<()> {
    let path = Path::new("/run/netns").join(name);
    let file = std::fs::File::open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("netns: cannot open {path:?}: {e}")))?;
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&file),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .map_err(|e| io::Error::other(format!("netns: cannot enter {name}: {e}; {NEEDS}")))
}

/// The pids in namespace `name`.
fn netns_pids(name: &str) -> io::Result<Vec<u32>> {
    let out = run(Command::new("ip").args(["netns", "pids", name]))?;
    out.split_whitespace()
        .map(|p| p.parse().map_err(|_| invalid(format!("bad pid {p:?}"))))
        .collect()
}

/// SIGKILLs every process in namespace `name`, until none is left (at most [`KILL_WAIT`]).
fn kill_netns(name: &str) -> io::Result<()> {
    let deadline = Instant::now() + KILL_WAIT;
    loop {
        let pids = netns_pids(name)?;
        if pids.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "netns: processes {pids:?} of {name} survive SIGKILL"
            )));
        }
        let mut kill = Command::new("kill");
        kill.arg("-KILL").args(pids.iter().map(u32::to_string));
        // Some may have died meanwhile: kill's failure for them is no error.
        let _ = kill.stdout(Stdio::null()).stderr(Stdio::null()).status();
        thread::sleep(Duration::from_millis(20));
    }
}

fn ip(args: &[&str]) -> io::Result<String> {
    run(Command::new("ip").args(args))
}

fn tc(args: &[&str]) -> io::Result<String> {
    run(Command::new("tc").args(args))
}

/// Runs `command`, its stdout; an error naming the command and its stderr if it fails.
fn run(command: &mut Command) -> io::Result<String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| spawn_error(&program, e))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let mut line = program;
    for arg in command.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    Err(io::Error::other(format!(
        "netns: `{line}` failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

fn spawn_error(program: &str, e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::NotFound {
        io::Error::new(e.kind(), format!("netns: `{program}` not found; {NEEDS}"))
    } else {
        io::Error::new(e.kind(), format!("netns: cannot run `{program}`: {e}"))
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("8mbit").unwrap(), 8_000_000);
        assert_eq!(parse_rate("10gbit").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate("1.5Mbit").unwrap(), 1_500_000);
        assert_eq!(parse_rate("500kbps").unwrap(), 4_000_000);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("8mb").is_err());
        assert_eq!(tbf_burst(8_000_000), 128 << 10);
        assert_eq!(tbf_burst(10_000_000_000), 6_250_000);
    }

    #[test]
    fn names() {
        assert!(check_prefix("abcde").is_ok());
        assert!(check_prefix("abcdef").is_err());
        assert!(check_prefix("a-b").is_err());
        assert!(check_prefix("").is_err());
        // The longest tag fits an interface name.
        assert!(format!("abcde-{:x}-{:x}", (1u32 << 22) - 1, 255).len() <= 15);
        // Stale: well formed and of a pid that cannot exist (pids are below 2^22).
        assert!(is_stale("ab", "ab-400000-0"));
        assert!(!is_stale("ab", &format!("ab-{:x}-0", std::process::id())));
        assert!(!is_stale("ab", "abc-400000-0"));
        assert!(!is_stale("ab", "ab-400000"));
        assert!(!is_stale("ab", "ab-zz-0"));
    }
}
