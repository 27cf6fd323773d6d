//! Reads one answer body `N` times with [`sluice_usage::read_body`], for
//! counting its instructions with callgrind (the difference of two runs,
//! divided by the difference of their `N`):
//!
//! ```sh
//! cargo build --release -p sluice-usage --example read_body
//! valgrind --tool=callgrind target/release/examples/read_body answer.json 1000
//! valgrind --tool=callgrind target/release/examples/read_body answer.json 2000
//! ```

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(n)) = (args.next(), args.next()) else {
        eprintln!("usage: read_body FILE N");
        std::process::exit(2);
    };
    let body = std::fs::read(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1);
    });
    let n: usize = n.parse().unwrap_or_else(|e| {
        eprintln!("N: {e}");
        std::process::exit(2);
    });
    let mut tokens = 0u64;
    for _ in 0..n {
        let facts = sluice_usage::read_body(
            sluice_usage::WireFormat::Openai,
            sluice_usage::Endpoint::Chat,
            std::hint::black_box(&body),
        );
        tokens += facts.usage.map_or(0, |u| u.total_tokens) + u64::from(facts.tool_calls);
    }
    println!("{tokens}");
}
