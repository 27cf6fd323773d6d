//! Command-line values clap does not parse by itself: durations (`30s`)
//! and per-provider rates (`openai=3,google=5` or `10`).

use std::time::Duration;

/// `500ms`, `30s`, `2m` or a bare number of seconds (`1.5`).
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration: write 500ms, 30s or 2m"))?;
    let d = Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("{s:?} is not a duration: it must be positive"))?;
    if d.is_zero() {
        return Err("the duration must be more than zero".into());
    }
    Ok(d)
}

/// Request limits per provider, requests per second: every provider's
/// (`10`), or some providers' (`openai=3,google=5`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRates {
    /// The rate of providers not named.
    pub all: Option<f64>,
    /// Rates by provider.
    pub named: Vec<(String, f64)>,
}

impl ProviderRates {
    /// The rate given for `provider`, if any.
    pub fn of(&self, provider: &str) -> Option<f64> {
        self.named
            .iter()
            .find(|(p, _)| p == provider)
            .map(|&(_, r)| r)
            .or(self.all)
    }
}

/// Parses `10` or `openai=3,google=5` (or both: `2,google=5`).
pub fn provider_rates(s: &str) -> Result<ProviderRates, String> {
    let rate = |v: &str| -> Result<f64, String> {
        let r: f64 = v
            .trim()
            .parse()
            .map_err(|_| format!("{v:?} is not a number of requests per second"))?;
        if !(r > 0.0 && r <= 1e6) {
            return Err(format!("{v:?}: a rate must be above 0 and at most 1000000"));
        }
        Ok(r)
    };
    let mut rates = ProviderRates {
        all: None,
        named: Vec::new(),
    };
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        match part.split_once('=') {
            Some((name, v)) => rates.named.push((name.trim().to_owned(), rate(v)?)),
            None => rates.all = Some(rate(part)?),
        }
    }
    Ok(rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("1.5"), Ok(Duration::from_millis(1_500)));
        assert!(duration("0s").is_err());
        assert!(duration("-1s").is_err());
        assert!(duration("soon").is_err());
    }

    #[test]
    fn rates() {
        let r = provider_rates("openai=3, google=5").unwrap();
        assert_eq!(
            (r.of("openai"), r.of("google"), r.of("anthropic")),
            (Some(3.0), Some(5.0), None)
        );
        let r = provider_rates("10,anthropic=2").unwrap();
        assert_eq!((r.of("openai"), r.of("anthropic")), (Some(10.0), Some(2.0)));
        assert!(provider_rates("openai=0").is_err());
        assert!(provider_rates("fast").is_err());
    }
}
