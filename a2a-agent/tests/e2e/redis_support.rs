//! Real `redis-server` processes for the tests: a single server or a 3-node Redis Cluster on free loopback ports,
//! with no persistence, stopped when dropped (and, through a watchdog, when the test process exits).
//!
//! `redis-server` and `redis-cli` are taken from `REDIS_SERVER` / `REDIS_CLI` or the `PATH` (`.ci/run` installs
//! them when missing; `apt-get install redis-server`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::{TempDir, free_port};

fn tool(var: &str, name: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| name.to_owned())
}

/// One `redis-server` process.
pub struct RedisServer {
    pub port: u16,
    watchdog: Option<Child>,
    pid: Option<u32>,
    cluster: bool,
    dir: TempDir,
}

impl RedisServer {
    /// A standalone server on a free port.
    pub fn start() -> RedisServer {
        Self::start_on(free_port(), false)
    }

    fn start_on(port: u16, cluster: bool) -> RedisServer {
        let dir = TempDir::new("redis");
        let mut s = RedisServer { port, watchdog: None, pid: None, cluster, dir };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let server = tool("REDIS_SERVER", "redis-server");
        let mut args: Vec<String> = vec![
            "--port".into(),
            self.port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            self.dir.0.display().to_string(),
            "--loglevel".into(),
            "warning".into(),
        ];
        if self.cluster {
            args.extend(
                ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"]
                    .map(String::from),
            );
        }
        // The watchdog shell starts redis-server, prints its pid, and stops it when the test process is gone.
        let script = format!(
            "\"$0\" \"$@\" >>'{}/redis.log' 2>&1 & r=$!; echo $r; trap 'kill -9 $r 2>/dev/null; exit 0' TERM; \
             while kill -0 {} 2>/dev/null && kill -0 $r 2>/dev/null; do sleep 0.5; done; kill -9 $r 2>/dev/null",
            self.dir.0.display(),
            std::process::id()
        );
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(&server)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {server} ({e}): install redis-server (apt-get install redis-server)")
            });
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout).read_line(&mut line).expect("redis pid");
        self.pid = line.trim().parse().ok();
        self.watchdog = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if self.cli(&["PING"]).is_some_and(|o| o.trim() == "PONG") {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} did not become ready", self.port);
    }

    /// Runs `redis-cli -p PORT args...`; its output.
    pub fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new(tool("REDIS_CLI", "redis-cli"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL): everything it held is gone, as after a crash without persistence.
    pub fn stop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.wait();
        }
        // Wait until the port is closed.
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again on the same port.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Redis Cluster of 3 masters (no replicas) on free ports.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start_on(free_port(), true)).collect();
        let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let mut args: Vec<&str> = vec!["--cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        let out = Command::new(tool("REDIS_CLI", "redis-cli"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster create");
        assert!(out.status.success(), "cluster create failed: {}", String::from_utf8_lossy(&out.stdout));
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = nodes.iter().all(|n| n.cli(&["CLUSTER", "INFO"]).is_some_and(|i| i.contains("cluster_state:ok")));
            if ok {
                break;
            }
            assert!(Instant::now() < until, "the cluster did not reach cluster_state:ok");
            std::thread::sleep(Duration::from_millis(50));
        }
        RedisCluster { nodes }
    }

    /// The seed URLs, comma-separated.
    pub fn urls(&self) -> String {
        self.nodes.iter().map(RedisServer::url).collect::<Vec<_>>().join(",")
    }
}

/// A standalone server shared by the tests of this binary (each test uses its own key prefix).
pub fn shared_server() -> &'static RedisServer {
    static S: OnceLock<RedisServer> = OnceLock::new();
    S.get_or_init(RedisServer::start)
}

/// A cluster shared by the tests of this binary (each test uses its own key prefix).
pub fn shared_cluster() -> &'static RedisCluster {
    static C: OnceLock<RedisCluster> = OnceLock::new();
    C.get_or_init(RedisCluster::start)
}

/// A key prefix no other test uses.
pub fn unique_prefix(name: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!("t{}-{}-{name}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
}
