//! Reads one OpenAI answer body and scans one OpenAI chat stream (its
//! usage chunk taken out) and one Anthropic stream, `N` times: what a
//! call costs in this crate through its format's dialect, for counting
//! instructions with callgrind (the difference of two runs, divided by
//! the difference of their `N`):
//!
//! ```sh
//! cargo build --release -p sluice-usage --example dialect_cost
//! valgrind --tool=callgrind target/release/examples/dialect_cost 1000
//! valgrind --tool=callgrind target/release/examples/dialect_cost 2000
//! ```
use bytes::Bytes;
use sluice_usage::{Endpoint, StreamScanner, WireFormat};

const BODY: &[u8] = br#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello there, how are you"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4}}}"#;

fn chat_stream() -> String {
    let mut s = String::new();
    for i in 0..20 {
        s += &format!(
            "data: {{\"id\":\"c1\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"word{i} \"}},\"finish_reason\":null}}]}}\n\n"
        );
    }
    s += "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":20,\"total_tokens\":29}}\n\ndata: [DONE]\n\n";
    s
}

fn anthropic_stream() -> String {
    let mut s = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
    );
    for i in 0..20 {
        s += &format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"word{i} \"}}}}\n\n"
        );
    }
    s += "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":20}}\n\n";
    s
}

fn main() {
    let Some(n) = std::env::args()
        .nth(1)
        .and_then(|a| a.parse::<usize>().ok())
    else {
        eprintln!("usage: dialect_cost N");
        std::process::exit(2);
    };
    let chat = Bytes::from(chat_stream());
    let anth = Bytes::from(anthropic_stream());
    let mut total = 0u64;
    for _ in 0..n {
        let f = sluice_usage::read_body(
            WireFormat::Openai,
            Endpoint::Chat,
            std::hint::black_box(BODY),
        );
        total += f.usage.map_or(0, |u| u.total_tokens);
        let mut s = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true);
        total += s.feed(std::hint::black_box(chat.clone())).len() as u64;
        total += s.usage().map_or(0, |u| u.total_tokens);
        let mut a = StreamScanner::new(WireFormat::Anthropic, Endpoint::Messages, false);
        total += a.feed(std::hint::black_box(anth.clone())).len() as u64;
        total += a.usage().map_or(0, |u| u.total_tokens);
    }
    println!("{total}");
}
