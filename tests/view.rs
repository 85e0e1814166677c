//! `view`: the self-contained HTML timeline, loaded in headless Chromium
//! from a file with no network (a network namespace of its own where the
//! machine allows one), scrubbed to an event through the page's own
//! `#seq=N` handling, its DOM read back and a screenshot taken.
//!
//! Chromium comes from Debian's `chromium` package (`.ci/chromium.sh`).
//! Without it these tests print a notice and pass, except in CI (`CI`
//! set), where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use agent_journal::{Journal, ToolCallRecord};

use crate::common::{path_str, run_cli};

/// The Chromium binary, or `None` (outside CI) when it is not installed.
pub(crate) fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("CHROMIUM").map(PathBuf::from).or_else(|| {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the viewer tests: run .ci/chromium.sh first (no /usr/bin/chromium)"
        );
        eprintln!("notice: chromium is not installed; skipping the viewer's browser test");
    }
    found
}

/// Runs headless Chromium on `url` with `mode` (`--dump-dom` or
/// `--screenshot=PATH`), without network, and returns its stdout.
pub(crate) fn headless(chromium: &Path, profile: &Path, url: &str, mode: &[&str]) -> String {
    // A network namespace of its own: no interface but a downed loopback.
    let isolated = Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .is_ok_and(|s| s.success());
    let mut c = if isolated {
        let mut c = Command::new("unshare");
        c.arg("-n").arg(chromium);
        c
    } else {
        Command::new(chromium)
    };
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--window-size=1400,900",
        // No network either way: every request goes to a closed port.
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(mode)
    .arg(url);
    let out = c.output().expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of attribute `attr` on the element whose attributes include
/// `marker` in the dumped DOM.
fn attr_near<'a>(dom: &'a str, marker: &str, attr: &str) -> Option<&'a str> {
    let at = dom.find(marker)?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let key = format!("{attr}=\"");
    let v = tag.find(&key)? + key.len();
    Some(&tag[v..v + tag[v..].find('"')?])
}

#[test]
fn the_timeline_page_scrubs_to_an_event_in_chromium_without_network() {
    let Some(chromium) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // A run that stopped with one call done and one in doubt, and a user
    // message that tries to end the data script and inject markup.
    let (id, result_seq, last_seq) = {
        let journal = Journal::open(&db).unwrap();
        let s = journal.create_session().unwrap();
        let e = s.start_evaluation("demo", "files").unwrap();
        e.system("You are careful.").unwrap();
        e.user("</script><img src=x onerror=\"document.title='pwned'\"> list it")
            .unwrap();
        e.assistant(
            "Two writes.",
            vec![
                ToolCallRecord::new("call_a", "write_file", "{\"path\":\"a.txt\"}"),
                ToolCallRecord::new("call_b", "write_file", "{\"path\":\"b.txt\"}"),
                ToolCallRecord::new("call_c", "write_file", "{\"path\":\"c.txt\"}"),
            ],
        )
        .unwrap();
        e.tool_started("call_a").unwrap();
        e.tool_result("call_a", "wrote a.txt").unwrap();
        let result_seq = s.head() - 1;
        // A failed call has a result message too: the page must show it
        // failed, as the fold does, not completed.
        e.tool_started("call_c").unwrap();
        e.tool_failed("call_c", "disk full").unwrap();
        e.tool_started("call_b").unwrap();
        (s.id(), result_seq, s.head() - 1)
    };
    let page = dir.path().join("run.html");
    let out = run_cli(&db, &["view", &id.to_string()[..8], "-o", path_str(&page)]);
    assert!(out.status.success(), "{out:?}");
    let url = format!("file://{}", page.display());
    let profile = dir.path().join("profile");

    // Scrubbed to the first tool result: call_a done, call_b not started.
    let dom = headless(
        &chromium,
        &profile,
        &format!("{url}#seq={result_seq}"),
        &["--dump-dom"],
    );
    let seq = result_seq.to_string();
    assert_eq!(
        attr_near(&dom, "id=\"state-seq\"", "data-seq"),
        Some(seq.as_str()),
        "{dom}"
    );
    assert_eq!(
        attr_near(&dom, "data-call=\"call_a\"", "data-status"),
        Some("completed")
    );
    assert_eq!(
        attr_near(&dom, "data-call=\"call_b\"", "data-status"),
        Some("pending")
    );
    assert_eq!(
        dom.matches("class=\"msg\"").count(),
        4,
        "system, user, assistant, tool"
    );
    assert!(dom.contains("wrote a.txt"));
    // The injected markup is text, not an element.
    assert!(dom.contains("&lt;/script&gt;&lt;img src=x"), "{dom}");
    assert!(
        !dom.contains("<img"),
        "markup from the journal became an element"
    );
    assert!(!dom.contains("pwned</title>"));
    assert!(attr_near(&dom, "data-first-render-ms", "data-first-render-ms").is_some());

    // At the end: call_b was started and never answered, so it is in doubt.
    let dom = headless(&chromium, &profile, &url, &["--dump-dom"]);
    let last = last_seq.to_string();
    assert_eq!(
        attr_near(&dom, "id=\"state-seq\"", "data-seq"),
        Some(last.as_str())
    );
    assert_eq!(
        attr_near(&dom, "data-call=\"call_b\"", "data-status"),
        Some("in_doubt")
    );
    assert_eq!(
        attr_near(&dom, "data-call=\"call_c\"", "data-status"),
        Some("failed"),
        "a failed call shows failed"
    );
    assert!(dom.contains("status-unfinished"));

    // A screenshot, kept under target/ to be looked at.
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("view");
    std::fs::create_dir_all(&shots).unwrap();
    let png = shots.join("timeline.png");
    let _ = std::fs::remove_file(&png);
    headless(
        &chromium,
        &profile,
        &format!("{url}#seq={result_seq}"),
        &[&format!("--screenshot={}", png.display())],
    );
    let bytes = std::fs::read(&png).expect("a screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000);
}

#[test]
fn view_writes_the_whole_page_or_nothing_and_names_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let id = {
        let journal = Journal::open(&db).unwrap();
        let s = journal.create_session().unwrap();
        s.start_evaluation("p", "k").unwrap().user("hello").unwrap();
        s.id()
    };
    let page = dir.path().join("out.html");
    let out = run_cli(
        &db,
        &["--json", "view", &id.to_string(), "-o", path_str(&page)],
    );
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["events"], 3);
    assert_eq!(v["path"], path_str(&page));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    assert!(html.contains("\"content\":\"hello\""));
    // A directory that does not exist: an error naming it, nothing written.
    let missing = dir.path().join("no/such/dir/out.html");
    let out = run_cli(&db, &["view", &id.to_string(), "-o", path_str(&missing)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/dir"));
    assert!(!missing.exists());
}

/// A GET with `host` as the Host header: (status code, body).
pub(crate) fn http_get(port: u16, host: &str, method: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        c,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    c.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a response");
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, body.to_owned())
}

/// A `serve` child, killed when dropped (also when a test fails).
pub(crate) struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `serve --port 0` on `db`: the child and its port.
pub(crate) fn start_serve(db: &Path) -> (Server, u16) {
    use std::io::BufRead;
    let mut server = crate::common::cli_command(db)
        .args(["serve", "--port", "0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let port: u16 = first
        .rsplit("127.0.0.1:")
        .next()
        .and_then(|t| t.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    (Server(server), port)
}

#[test]
fn serve_lists_the_sessions_and_follows_one_while_an_agent_appends() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // This process is the agent: it holds the database the whole time.
    let journal = Journal::open(&db).unwrap();
    let s = journal.create_session().unwrap();
    let e = s.start_evaluation("demo", "files").unwrap();
    e.user("hello <b>there</b>").unwrap();
    let (_server, port) = start_serve(&db);
    let host = format!("127.0.0.1:{port}");
    let id = s.id().to_string();

    let (code, index) = http_get(port, &host, "GET", "/");
    assert_eq!(code, 200, "{index}");
    assert!(index.contains(&format!("href=\"/s/{id}\"")));
    let (code, page) = http_get(port, &host, "GET", &format!("/s/{}", &id[..8]));
    assert_eq!(code, 200);
    assert!(page.contains("connect-src 'self'") && page.contains("hello \\u003cb>there"));

    let events = |from: u64| {
        let (code, body) = http_get(
            port,
            &host,
            "GET",
            &format!("/api/s/{id}/events?from={from}"),
        );
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };
    let before = s.head();
    let all = events(0);
    assert_eq!(all["events"].as_array().unwrap().len() as u64, before);
    assert_eq!(all["status"], "unfinished");
    // The agent goes on: the page's poll gets exactly the new events.
    e.assistant("done", vec![]).unwrap();
    e.finish(agent_journal::Outcome::Succeeded).unwrap();
    let new = events(before);
    let types: Vec<&str> = new["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["message", "evaluation_finished"]);
    assert_eq!(new["events"][0]["seq"], before);
    assert_eq!(new["status"], "finished");

    // Refusals: another Host (DNS rebinding), another method, no such page.
    assert_eq!(http_get(port, "evil.example", "GET", "/").0, 403);
    assert_eq!(http_get(port, &host, "POST", "/").0, 405);
    assert_eq!(http_get(port, &host, "GET", "/nothing").0, 404);
    assert_eq!(http_get(port, &host, "GET", "/s/ffffffff").0, 404);

    // The served page in a browser: the state at the last event.
    if let Some(chromium) = chromium() {
        let out = Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--dump-dom",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("p").display()
            ))
            .arg(format!("http://{host}/s/{id}"))
            .output()
            .unwrap();
        let dom = String::from_utf8_lossy(&out.stdout);
        let last = (s.head() - 1).to_string();
        assert_eq!(
            attr_near(&dom, "id=\"state-seq\"", "data-seq"),
            Some(last.as_str()),
            "{dom}"
        );
    }
}

/// VmRSS of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// The status code at the start of what `c` answers, if any.
fn status_of(c: &mut std::net::TcpStream) -> Option<u16> {
    use std::io::Read;
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut head = [0u8; 12];
    c.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// `serve` bounds what a client sends: a 100 MB request line or header
/// line without end costs it no more than a few MB, a head longer than
/// 16 KiB is refused (431), connections beyond its pool are refused at
/// once (503), a client sending nothing is dropped after 10 s (408), and
/// it answers normal requests all along.
#[test]
fn serve_bounds_request_heads_connections_and_idle_clients() {
    use std::io::Write;
    use std::net::TcpStream;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    drop(Journal::open(&db).unwrap().create_session().unwrap());
    let (server, port) = start_serve(&db);
    let host = format!("127.0.0.1:{port}");
    assert_eq!(http_get(port, &host, "GET", "/").0, 200);
    let before = rss_kib(server.0.id());
    let mut idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let opened = Instant::now();

    // 100 MB without an end, in the request line and in a header line.
    let senders: Vec<_> = [
        "GET /".to_owned(),
        format!("GET / HTTP/1.1\r\nHost: {host}\r\nX-Long: "),
    ]
    .into_iter()
    .map(|head| {
        std::thread::spawn(move || {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.write_all(head.as_bytes()).unwrap();
            let chunk = vec![b'a'; 1 << 20];
            let mut sent = 0;
            while sent < 100 << 20 && c.write_all(&chunk).is_ok() {
                sent += chunk.len();
            }
            sent
        })
    })
    .collect();
    let mut peak = before;
    while !senders.iter().all(|s| s.is_finished()) {
        peak = peak.max(rss_kib(server.0.id()));
        std::thread::sleep(Duration::from_millis(5));
    }
    for s in senders {
        let sent = s.join().unwrap();
        assert!(sent < 50 << 20, "the server read {sent} bytes of it");
    }
    peak = peak.max(rss_kib(server.0.id()));
    eprintln!("serve: VmRSS {before} KiB, at most {peak} KiB while two clients sent 100 MB heads");
    assert!(
        peak < before + 4096,
        "VmRSS grew from {before} to {peak} KiB"
    );
    assert_eq!(http_get(port, &host, "GET", "/").0, 200);

    // A head just too long, then silence: the refusal is read.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        c,
        "GET / HTTP/1.1\r\nHost: {host}\r\nX-Long: {}",
        "a".repeat(20 << 10)
    )
    .unwrap();
    assert_eq!(status_of(&mut c), Some(431));
    // A body is refused.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        c,
        "GET / HTTP/1.1\r\nHost: {host}\r\nContent-Length: 3\r\n\r\nabc"
    )
    .unwrap();
    assert_eq!(status_of(&mut c), Some(413));

    // 200 clients that send nothing: those beyond the pool are refused
    // at once; once they go, the server answers again.
    let t = Instant::now();
    let mut many: Vec<_> = (0..200)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // (Connections the kernel completes late, its accept queue full, are
    // answered a moment later.)
    std::thread::sleep(Duration::from_secs(3));
    let mut refused = 0;
    for c in &mut many {
        c.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        refused += usize::from(status_of_quick(c) == Some(503));
    }
    // 16 workers and 64 waiting: the other 120 are refused.
    assert!(refused >= 110, "{refused} of 200 refused at once");
    assert!(t.elapsed() < Duration::from_secs(9), "{:?}", t.elapsed());
    drop(many);
    assert_eq!(http_get(port, &host, "GET", "/").0, 200);

    // The silent client was dropped with 408 after 10 s.
    assert_eq!(status_of(&mut idle), Some(408));
    let waited = opened.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(20),
        "{waited:?}"
    );
}

/// [`status_of`] with the timeout already set on `c`.
fn status_of_quick(c: &mut std::net::TcpStream) -> Option<u16> {
    use std::io::Read;
    let mut head = [0u8; 12];
    c.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

#[test]
fn serve_compares_two_sessions_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (a, b) = {
        let journal = Journal::open(&db).unwrap();
        let a = journal.create_session().unwrap();
        a.start_evaluation("demo", "files")
            .unwrap()
            .user("first <run>")
            .unwrap();
        let b = a.fork(1).unwrap();
        b.append(agent_journal::Event::Custom {
            kind: "note".into(),
            payload: Vec::new(),
        })
        .unwrap();
        (a.id().to_string(), b.id().to_string())
    };
    let (_server, port) = start_serve(&db);
    let host = format!("127.0.0.1:{port}");
    let (code, page) = http_get(
        port,
        &host,
        "GET",
        &format!("/compare/{}/{}", &a[a.len() - 8..], &b[b.len() - 8..]),
    );
    assert_eq!(code, 200, "{page}");
    assert!(
        page.contains(&a) && page.contains(&b),
        "both sessions in the page"
    );
    assert!(page.contains("default-src 'none'"), "self-contained");
    let (code, _) = http_get(port, &host, "GET", &format!("/compare/{a}/ffffffff"));
    assert_eq!(code, 404);
}
