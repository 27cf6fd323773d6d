//! `sluice prices`: what a model costs under a config, and where that
//! price came from (`[prices]` in the config, the hand-checked table, or
//! the price map), and `refresh`, which downloads the community price map
//! into a file that `[pricing] catalog` can name.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};
use sluice_gateway::config::{Config, catalog, price_table};
use sluice_usage::{Catalog, MAX_CATALOG_BYTES, Price, PriceTable};

/// LiteLLM's price map, maintained by its community (MIT-licensed data).
pub const LITELLM_URL: &str =
    "https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json";

/// `sluice prices …`.
#[derive(Debug, clap::Args)]
pub struct PricesArgs {
    #[command(subcommand)]
    what: PricesCommand,
}

#[derive(Debug, clap::Subcommand)]
enum PricesCommand {
    /// The price of MODEL under the config (or how many models are
    /// priced, without one): per million tokens, where it came from, and
    /// its context window.
    Show {
        /// A model as clients name it (`openai/gpt-4o-mini`).
        model: Option<String>,
        /// The config file; `SLUICE_CONFIG` works too.
        #[arg(long, short, env = "SLUICE_CONFIG")]
        config: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Download a price map in LiteLLM's format, check that it reads, and
    /// write it to OUT (atomically); then set `[pricing] catalog = "OUT"`.
    Refresh {
        /// Where to write the map.
        #[arg(long)]
        out: PathBuf,
        /// Where to download it from.
        #[arg(long, default_value = LITELLM_URL)]
        url: String,
        /// How long the download may take, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout_seconds: u64,
    },
}

/// Runs `sluice prices`.
pub async fn run(args: PricesArgs) -> ExitCode {
    let done = match args.what {
        PricesCommand::Show {
            model,
            config,
            json,
        } => show(config.as_deref(), model.as_deref(), json),
        PricesCommand::Refresh {
            out,
            url,
            timeout_seconds,
        } => refresh(&url, &out, timeout_seconds).await,
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice prices: {e}");
            ExitCode::FAILURE
        }
    }
}

fn show(config: Option<&Path>, model: Option<&str>, as_json: bool) -> Result<(), String> {
    let config = sluice_gateway::config::load(config).map_err(|e| e.to_string())?;
    let map = catalog(&config.pricing).map_err(|e| e.to_string())?;
    let table = price_table(&config.pricing, &config.prices).map_err(|e| e.to_string())?;
    let Some(model) = model else {
        let out = json!({
            "catalog": config.pricing.catalog,
            "catalog_models": map.prices.len(),
            "catalog_skipped": map.skipped,
            "hand_checked": PriceTable::defaults().len(),
            "config_prices": config.prices.len(),
        });
        if as_json {
            println!("{out}");
        } else {
            println!(
                "price map ({}): {} models ({} entries skipped)\nhand-checked table: {} prefixes\n[prices] in the config: {} prefixes",
                config.pricing.catalog,
                map.prices.len(),
                map.skipped,
                PriceTable::defaults().len(),
                config.prices.len()
            );
        }
        return Ok(());
    };
    let window = map.window(model);
    let Some((prefix, price)) = table.priced_by(model) else {
        let out = json!({"model": model, "priced": false, "context_window": window_json(window)});
        if as_json {
            println!("{out}");
            return Ok(());
        }
        return Err(format!(
            "{model:?} has no price: add `[prices.{model:?}]` with `input` and `output` \
             (dollars per million tokens) to the config, or point `[pricing] catalog` at a \
             price map that has it (`sluice prices refresh`)"
        ));
    };
    let source = source(&config, prefix);
    if as_json {
        println!(
            "{}",
            json!({
                "model": model, "priced": true, "prefix": prefix, "source": source,
                "per_million": {
                    "input": per_million(price.input),
                    "output": per_million(price.output),
                    "cached_input": per_million(price.cached_input),
                },
                "context_window": window_json(window),
            })
        );
        return Ok(());
    }
    print_price(model, prefix, &source, price);
    if let Some(w) = window {
        let n = |v: Option<u64>| v.map_or("?".to_owned(), |v| v.to_string());
        println!(
            "context window: {} tokens in, {} out",
            n(w.max_input_tokens),
            n(w.max_output_tokens)
        );
    }
    Ok(())
}

fn print_price(model: &str, prefix: &str, source: &str, price: &Price) {
    println!("{model}: priced by {prefix:?} ({source})");
    println!(
        "per million tokens: input ${}, output ${}, cached input ${}",
        per_million(price.input),
        per_million(price.output),
        per_million(price.cached_input)
    );
}

/// Where the price under `prefix` came from.
fn source(config: &Config, prefix: &str) -> String {
    if config.prices.contains_key(prefix) {
        "[prices] in the config".to_owned()
    } else if PriceTable::defaults().iter().any(|(p, _)| p == prefix) {
        "the hand-checked table, crates/usage/prices.json".to_owned()
    } else {
        format!(
            "the price map, [pricing] catalog = {:?}",
            config.pricing.catalog
        )
    }
}

fn window_json(w: Option<sluice_usage::Window>) -> Value {
    w.map_or(Value::Null, |w| {
        json!({"max_input_tokens": w.max_input_tokens, "max_output_tokens": w.max_output_tokens})
    })
}

/// Picodollars per token as dollars per million tokens, exactly.
fn per_million(pico: u64) -> String {
    let whole = pico / 1_000_000;
    let frac = pico % 1_000_000;
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:06}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

async fn refresh(url: &str, out: &Path, timeout_seconds: u64) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("--url {url:?}: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("--url {url:?} must be an http:// or https:// URL"));
    }
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(timeout_seconds))
        .build()
        .map_err(|e| format!("http client: {e}"))?;
    let mut answer = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !answer.status().is_success() {
        return Err(format!("{url} answered {}", answer.status()));
    }
    // Read at most one byte past the bound.
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(|e| format!("{url}: {e}"))? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_CATALOG_BYTES {
            return Err(format!(
                "{url}: more than {MAX_CATALOG_BYTES} bytes; not a price map"
            ));
        }
    }
    let text = String::from_utf8(body).map_err(|_| format!("{url}: not UTF-8 text"))?;
    let map = Catalog::from_litellm_json(&text).map_err(|e| format!("{url}: {}", e.reason))?;
    write_atomically(out, text.as_bytes()).map_err(|e| format!("{}: {e}", out.display()))?;
    println!(
        "{}: {} models priced ({} entries of other kinds skipped); set [pricing] catalog = {:?}",
        out.display(),
        map.prices.len(),
        map.skipped,
        out.display().to_string()
    );
    Ok(())
}

/// Writes `bytes` to a file beside `path`, syncs it, then renames it over
/// `path`: a reader finds the old map or the new one, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("names no file"))?;
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::per_million;

    #[test]
    fn picodollars_print_as_dollars_per_million_exactly() {
        assert_eq!(per_million(2_500_000), "2.5");
        assert_eq!(per_million(10_000_000), "10");
        assert_eq!(per_million(75_000), "0.075");
        assert_eq!(per_million(1), "0.000001");
        assert_eq!(per_million(0), "0");
    }
}
