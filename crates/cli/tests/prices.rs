//! `sluice prices`: a price map refreshed from an HTTP server on loopback
//! into a file, checked before it is written, then used by a config.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};

use common::TempDir;

/// Serves `body` with `status` to the first `n` connections, on a port of
/// its own; its URL.
fn server(status: &'static str, body: &'static str, n: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}/prices.json", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(n) {
            let Ok(mut stream) = stream else { continue };
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("SLUICE_CONFIG")
        .output()
        .expect("sluice runs")
}

const MAP: &str = r#"{
  "sample_spec": {"input_cost_per_token": "see the docs"},
  "acme-large": {"litellm_provider": "acme", "mode": "chat",
    "input_cost_per_token": 4e-06, "output_cost_per_token": 1.6e-05,
    "max_input_tokens": 64000, "max_output_tokens": 4096},
  "acme-image": {"litellm_provider": "acme", "mode": "image_generation",
    "input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06}
}"#;

#[test]
fn a_refreshed_map_is_written_whole_and_prices_models_through_the_config() {
    let dir = TempDir::new("prices");
    let out = dir.join("prices.json");
    let out_s = out.display().to_string();
    let url = server("200 OK", MAP, 1);
    let done = sluice(&["prices", "refresh", "--url", &url, "--out", &out_s]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let said = String::from_utf8_lossy(&done.stdout);
    assert!(
        said.contains("1 models priced (1 entries of other kinds skipped)"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), MAP);

    let config = dir.join("sluice.toml");
    std::fs::write(&config, format!("[pricing]\ncatalog = {out_s:?}\n")).unwrap();
    let config_s = config.display().to_string();
    let shown = sluice(&[
        "prices",
        "show",
        "acme/acme-large",
        "--config",
        &config_s,
        "--json",
    ]);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(v["per_million"]["input"], "4");
    assert_eq!(v["per_million"]["output"], "16");
    assert_eq!(v["context_window"]["max_input_tokens"], 64000);
    assert!(v["source"].as_str().unwrap().contains("price map"), "{v}");
    // The file replaced the shipped map.
    let gone = sluice(&["prices", "show", "openai/gpt-5", "--config", &config_s]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&gone.stderr).contains("[prices.\"openai/gpt-5\"]"));
}

#[test]
fn a_download_that_is_not_a_price_map_leaves_the_old_file_alone() {
    let dir = TempDir::new("prices-bad");
    let out = dir.join("prices.json");
    std::fs::write(&out, MAP).unwrap();
    let out_s = out.display().to_string();
    for (status, body, says) in [
        ("200 OK", "<html>rate limited</html>", "LiteLLM's format"),
        ("200 OK", r#"{"x": {"mode": "rerank"}}"#, "prices no chat"),
        ("503 Service Unavailable", "{}", "503"),
    ] {
        let url = server(status, body, 1);
        let done = sluice(&["prices", "refresh", "--url", &url, "--out", &out_s]);
        assert_eq!(done.status.code(), Some(1), "{body}");
        let err = String::from_utf8_lossy(&done.stderr);
        assert!(err.contains(says), "{body}: {err}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), MAP, "{body}");
    }
    let refused = sluice(&[
        "prices",
        "refresh",
        "--url",
        "file:///etc/passwd",
        "--out",
        &out_s,
    ]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("http://"));
}
