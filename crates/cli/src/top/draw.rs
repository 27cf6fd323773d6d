//! One frame of `sluice top`, drawn from a snapshot and its history: the
//! same figures as the page, as tables and sparklines.

use ratatui::Frame;
use ratatui::backend::TestBackend;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Sparkline, Table};
use sluice_gateway::dashboard::view::{Point, ResourceView, Snapshot};

/// What a frame shows.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The gateway's URL.
    pub target: String,
    /// `live`, `reconnecting (…)`, `snapshot`.
    pub status: String,
    /// The latest snapshot, once one came.
    pub snapshot: Option<Snapshot>,
    /// One point a second, oldest first.
    pub history: Vec<Point>,
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), num)
}

fn header(view: &View) -> Line<'static> {
    let live = view.status == "live" || view.status == "snapshot";
    let status = Style::default().fg(if live { Color::Green } else { Color::Red });
    let mut spans = vec![
        Span::styled("sluice top ", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(format!("{}  ", view.target)),
        Span::styled(view.status.clone(), status),
    ];
    if let Some(s) = &view.snapshot {
        spans.push(Span::raw(format!(
            "  rates over {:.1} s  ·  q quits",
            s.window_s
        )));
    }
    Line::from(spans)
}

fn totals(s: &Snapshot) -> Line<'static> {
    let sum = |f: fn(&ResourceView) -> f64| s.resources.iter().map(f).sum::<f64>();
    let q = &s.queue.queued;
    Line::from(format!(
        "requests/s {}   admitted/s {}   in flight {}   queued {}·{}·{} (high·normal·low)   upstream 429/s {}   busy {}",
        num(sum(|r| r.requests_per_second)),
        num(sum(|r| r.admitted_per_second)),
        s.queue.in_flight,
        q.high,
        q.normal,
        q.low,
        num(sum(|r| r.upstream_429_per_second)),
        if s.queue.busy { "yes" } else { "no" },
    ))
}

fn resources(s: &Snapshot) -> Table<'static> {
    let head = Row::new([
        "resource",
        "limit/s now·conf",
        "why different",
        "adm/s",
        "req/s",
        "infl",
        "queued h·n·l",
        "429/s (total)",
        "retries",
        "p50 ms",
        "p99 ms",
    ])
    .style(Style::default().fg(Color::DarkGray));
    let rows = s.resources.iter().map(|r| {
        let limit = match (r.per_second, r.configured_per_second) {
            (Some(now), Some(conf)) => format!("{}·{}", num(now), num(conf)),
            _ => "none".into(),
        };
        let style = if r.reason.is_some() {
            Style::default().fg(Color::Yellow)
        } else {
            Style::default()
        };
        Row::new([
            Cell::from(r.resource.clone()),
            Cell::from(limit),
            Cell::from(r.reason.clone().unwrap_or_default()),
            Cell::from(num(r.admitted_per_second)),
            Cell::from(num(r.requests_per_second)),
            Cell::from(r.in_flight.to_string()),
            Cell::from(format!(
                "{}·{}·{}",
                r.queued.high, r.queued.normal, r.queued.low
            )),
            Cell::from(format!(
                "{} ({})",
                num(r.upstream_429_per_second),
                r.upstream_429_total
            )),
            Cell::from(r.retries_total.to_string()),
            Cell::from(opt(r.p50_ms)),
            Cell::from(opt(r.p99_ms)),
        ])
        .style(style)
    });
    Table::new(
        rows,
        [
            Constraint::Min(18),
            Constraint::Length(16),
            Constraint::Min(14),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(5),
            Constraint::Length(12),
            Constraint::Length(13),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(7),
        ],
    )
    .header(head)
    .block(
        Block::default()
            .borders(Borders::TOP)
            .title(" models and APIs "),
    )
}

fn tenants(s: &Snapshot) -> Table<'static> {
    // Today's spend (UTC day) from the ledger, or in a word why there
    // is none (the column is narrow).
    let spend = |tenant: &str| match &s.spend.data {
        Some(d) => d.tenants.iter().find(|x| x.tenant == tenant).map_or_else(
            || "–".to_owned(),
            // `+` when some calls had no price: the sum is short.
            |x| {
                format!(
                    "${:.4}{}",
                    x.cost_usd,
                    if x.unpriced > 0 { "+" } else { "" }
                )
            },
        ),
        None if s.spend.state == "not configured" => "no ledger".to_owned(),
        None => "error".to_owned(),
    };
    let head = Row::new([
        "tenant", "req/s", "share", "wait ms", "queued", "total", "spend",
    ])
    .style(Style::default().fg(Color::DarkGray));
    let rows = s.tenants.iter().map(|t| {
        Row::new([
            t.tenant.clone(),
            num(t.requests_per_second),
            format!("{:.0}%", t.share * 100.0),
            opt(t.queue_wait_ms),
            t.queued.to_string(),
            t.requests_total.to_string(),
            spend(&t.tenant),
        ])
    });
    Table::new(
        rows,
        [
            Constraint::Min(10),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(10),
        ],
    )
    .header(head)
    .block(Block::default().borders(Borders::TOP).title(" tenants "))
}

fn jobs(s: &Snapshot) -> Table<'static> {
    let head = Row::new([
        "queue", "avail", "sched", "run", "retry", "done", "dead", "cancel",
    ])
    .style(Style::default().fg(Color::DarkGray));
    let rows: Vec<Row> = match &s.jobs.data {
        Some(queues) => queues
            .iter()
            .map(|q| {
                let c = &q.counts;
                let name = if q.paused {
                    format!("{} (paused)", q.queue)
                } else {
                    q.queue.clone()
                };
                let dead = Style::default().fg(if c.dead > 0 { Color::Red } else { Color::Reset });
                Row::new([
                    Cell::from(name),
                    Cell::from(c.available.to_string()),
                    Cell::from(c.scheduled.to_string()),
                    Cell::from(c.running.to_string()),
                    Cell::from(c.retryable.to_string()),
                    Cell::from(c.completed.to_string()),
                    Cell::from(c.dead.to_string()).style(dead),
                    Cell::from(c.cancelled.to_string()),
                ])
            })
            .collect(),
        None => {
            // The source's state across the whole width.
            return Table::new([Row::new([s.jobs.state.clone()])], [Constraint::Min(20)])
                .block(Block::default().borders(Borders::TOP).title(" jobs "));
        }
    };
    let w = Constraint::Length(6);
    Table::new(rows, [Constraint::Min(12), w, w, w, w, w, w, w])
        .header(head)
        .block(Block::default().borders(Borders::TOP).title(" jobs "))
}

fn audit(s: &Snapshot) -> Paragraph<'static> {
    let lines: Vec<Line> = match &s.audit.data {
        Some(entries) if !entries.is_empty() => entries
            .iter()
            .take(5)
            .map(|e| {
                let field = |k: &str| e[k].as_str().unwrap_or("").to_owned();
                Line::from(format!(
                    "{}  {}  {}",
                    field("actor"),
                    field("kind"),
                    field("target")
                ))
            })
            .collect(),
        Some(_) => vec![Line::from("nothing recorded yet")],
        None => vec![Line::from(s.audit.state.clone())],
    };
    Paragraph::new(lines).block(
        Block::default()
            .borders(Borders::TOP)
            .title(" recent administrative acts "),
    )
}

fn spark<'a>(title: &'a str, data: &'a [u64]) -> Sparkline<'a> {
    Sparkline::default()
        .block(Block::default().borders(Borders::TOP).title(title))
        .data(data)
        .style(Style::default().fg(Color::Cyan))
}

/// Draws `view` on the whole frame.
pub fn draw(frame: &mut Frame, view: &View) {
    let area = frame.area();
    let Some(s) = &view.snapshot else {
        let [top, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
        frame.render_widget(Paragraph::new(header(view)), top);
        frame.render_widget(Paragraph::new("waiting for the first snapshot…"), rest);
        return;
    };
    let [top, sums, charts, table, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(5),
        Constraint::Min(6),
        Constraint::Length(9),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header(view)), top);
    frame.render_widget(Paragraph::new(totals(s)), sums);

    // The newest points that fit, right-aligned as time goes.
    let width = (charts.width / 2).max(1) as usize;
    let recent = &view.history[view.history.len().saturating_sub(width)..];
    let admitted: Vec<u64> = recent
        .iter()
        .map(|p| {
            p.resources
                .values()
                .map(|v| v[0].unwrap_or(0.0))
                .sum::<f64>()
                .round() as u64
        })
        .collect();
    let queued: Vec<u64> = recent.iter().map(|p| p.queued + p.in_flight).collect();
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts);
    frame.render_widget(spark(" admitted/s ", &admitted), left);
    frame.render_widget(spark(" queued + in flight ", &queued), right);

    frame.render_widget(resources(s), table);
    let [t, j, a]: [Rect; 3] = Layout::horizontal([
        Constraint::Percentage(40),
        Constraint::Percentage(35),
        Constraint::Percentage(25),
    ])
    .areas(bottom);
    frame.render_widget(tenants(s), t);
    frame.render_widget(jobs(s), j);
    frame.render_widget(audit(s), a);
}

/// `view` drawn on a `width` × `height` frame, as lines of text.
pub fn to_text(view: &View, width: u16, height: u16) -> String {
    let mut terminal = ratatui::Terminal::new(TestBackend::new(width, height))
        .expect("a test backend never fails");
    terminal
        .draw(|f| draw(f, view))
        .expect("a test backend never fails");
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let mut line = String::new();
        for x in 0..buffer.area.width {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_gateway::dashboard::view::{
        ByPriority, QueueView, Section, Spend, TenantQueued, TenantSpend, TenantView,
    };

    fn snapshot() -> Snapshot {
        let mut jobs = sluice_jobs::QueueCounts {
            queue: "discord".into(),
            paused: false,
            counts: Default::default(),
        };
        jobs.counts.completed = 12;
        jobs.counts.dead = 2;
        Snapshot {
            at_ms: 1_764_149_000_000,
            window_s: 5.0,
            resources: vec![
                ResourceView {
                    resource: "openai/gpt-4o-mini".into(),
                    kind: "model".into(),
                    configured_per_second: Some(3.0),
                    per_second: Some(1.5),
                    reason: Some("cut after 429s, recovering".into()),
                    admitted_per_second: 1.4,
                    requests_per_second: 2.25,
                    in_flight: 3,
                    queued: ByPriority {
                        high: 1,
                        normal: 4,
                        low: 0,
                    },
                    upstream_429_per_second: 0.2,
                    upstream_429_total: 7,
                    retries_total: 5,
                    p50_ms: Some(41.0),
                    p99_ms: Some(312.0),
                    ..ResourceView::default()
                },
                ResourceView {
                    resource: "api:slack".into(),
                    kind: "api".into(),
                    ..ResourceView::default()
                },
            ],
            queue: QueueView {
                queued: ByPriority {
                    high: 1,
                    normal: 4,
                    low: 0,
                },
                in_flight: 3,
                busy: false,
                by_tenant: vec![TenantQueued {
                    tenant: "acme".into(),
                    queued: 5,
                }],
            },
            tenants: vec![TenantView {
                tenant: "acme".into(),
                requests_per_second: 2.25,
                share: 0.75,
                queue_wait_ms: Some(120.0),
                requests_total: 400,
                queued: 5,
            }],
            jobs: Section::ok(vec![jobs]),
            audit: Section::not_configured(),
            spend: Section::ok(Spend {
                since_ms: 1_764_115_200_000,
                tenants: vec![TenantSpend {
                    tenant: "acme".into(),
                    requests: 400,
                    prompt_tokens: 9_000,
                    completion_tokens: 4_000,
                    cost_nanos: 12_345_600_000,
                    cost_usd: 12.3456,
                    unpriced: 0,
                }],
            }),
        }
    }

    #[test]
    fn a_frame_shows_the_snapshot() {
        let s = snapshot();
        let view = View {
            target: "http://gw:8080".into(),
            status: "live".into(),
            history: vec![Point::of(&s); 30],
            snapshot: Some(s),
        };
        let text = to_text(&view, 150, 40);
        for want in [
            "http://gw:8080",
            "live",
            "requests/s 2.25",
            "queued 1·4·0",
            "openai/gpt-4o-mini",
            "1.50·3.00",
            "cut after 429s",
            "0.20 (7)",
            "312",
            "api:slack",
            "acme",
            "75%",
            "discord",
            "$12.3456",
            "not configured",
        ] {
            assert!(text.contains(want), "{want:?} missing from:\n{text}");
        }
        // The dead letters' row.
        let discord = text.lines().find(|l| l.contains("discord")).unwrap();
        assert!(
            discord.contains(" 12 ") && discord.contains(" 2 "),
            "{discord}"
        );
    }

    #[test]
    fn before_the_first_snapshot_it_says_so() {
        let view = View {
            target: "http://gw:8080".into(),
            status: "connecting".into(),
            ..View::default()
        };
        let text = to_text(&view, 80, 10);
        assert!(text.contains("waiting for the first snapshot"), "{text}");
        assert!(text.contains("connecting"), "{text}");
    }
}
