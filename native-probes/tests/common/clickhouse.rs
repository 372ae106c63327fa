//! A ClickHouse server for tests and benches: Debian's `clickhouse-server` started on
//! loopback ports with its own data directory and configuration, stopped and removed on
//! drop. `None` (with the reason) where it cannot start.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SERVER: &str = "/usr/sbin/clickhouse-server";

pub struct ClickhouseServer {
    child: Child,
    pub dir: PathBuf,
    pub http_port: u16,
}

impl ClickhouseServer {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Starts a server whose HTTP interface listens on `http_port` (0: a free port).
    pub fn start(http_port: u16) -> Result<ClickhouseServer, String> {
        if !std::path::Path::new(SERVER).exists() {
            return Err(format!(
                "{SERVER} is not installed (Debian package clickhouse-server)"
            ));
        }
        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let http_port = if http_port == 0 { free() } else { http_port };
        let tcp_port = free();
        let dir =
            std::env::temp_dir().join(format!("nowcast-ch-{}-{http_port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let d = dir.display();
        std::fs::write(
            dir.join("config.xml"),
            format!(
                "<yandex>\n <logger><level>warning</level><log>{d}/log</log><errorlog>{d}/err.log</errorlog><console>0</console></logger>\n \
                 <http_port>{http_port}</http_port>\n <tcp_port>{tcp_port}</tcp_port>\n <listen_host>127.0.0.1</listen_host>\n \
                 <path>{d}/data/</path>\n <tmp_path>{d}/tmp/</tmp_path>\n <user_files_path>{d}/user_files/</user_files_path>\n \
                 <format_schema_path>{d}/format_schemas/</format_schema_path>\n <users_config>{d}/users.xml</users_config>\n \
                 <default_profile>default</default_profile>\n <default_database>default</default_database>\n \
                 <mark_cache_size>268435456</mark_cache_size>\n <uncompressed_cache_size>268435456</uncompressed_cache_size>\n \
                 <max_concurrent_queries>20</max_concurrent_queries>\n <timezone>UTC</timezone>\n</yandex>\n"
            ),
        )
        .map_err(|e| e.to_string())?;
        std::fs::write(
            dir.join("users.xml"),
            "<yandex>\n <profiles><default><max_memory_usage>4000000000</max_memory_usage><max_threads>2</max_threads></default></profiles>\n \
             <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>\n \
             <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>\n</yandex>\n",
        )
        .map_err(|e| e.to_string())?;
        let child = Command::new(SERVER)
            .arg(format!("--config-file={}/config.xml", d))
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{SERVER}: {e}"))?;
        let mut server = ClickhouseServer {
            child,
            dir,
            http_port,
        };
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if let Ok(Some(s)) = server.child.try_wait() {
                let log = std::fs::read_to_string(server.dir.join("err.log")).unwrap_or_default();
                return Err(format!(
                    "clickhouse-server exited ({s}): {}",
                    log.lines().last().unwrap_or("")
                ));
            }
            if ping(http_port) {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        server.stop();
        Err("clickhouse-server did not answer within 30 s".into())
    }

    pub fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                if let Ok(Some(_)) = self.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(b"GET /ping HTTP/1.0\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.contains("Ok.")
}

impl Drop for ClickhouseServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
