//! The real harnesses from npm (pinned in `.ci/run`) and the fake model server they are driven
//! against (`tests/support/fake_model.py`).

use crate::common::*;
use std::io::{Read, Write};

#[test]
fn the_pinned_harnesses_are_the_versions_docs_harness_md_names() {
    for (name, version) in [("claude", "2.1.332"), ("codex", "0.171.0"), ("opencode", "1.18.33")] {
        let Some(bin) = harness(name) else { continue };
        let out = std::process::Command::new(&bin).arg("--version").output().unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(shown.contains(version), "{name} --version: {shown}");
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/harness.md")).unwrap();
        assert!(doc.contains(version), "docs/harness.md names {name} {version}");
    }
}

#[test]
fn the_fake_model_server_logs_each_request_and_refuses_unknown_paths() {
    let model = FakeModel::start(serde_json::json!([]));
    let mut conn = std::net::TcpStream::connect(model.url().trim_start_matches("http://")).unwrap();
    let body = r#"{"hello":1}"#;
    write!(
        conn,
        "POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["path"], "/nowhere");
    assert_eq!(requests[0]["body"]["hello"], 1);
}
