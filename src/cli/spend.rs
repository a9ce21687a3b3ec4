//! `git boulder spend [NAME]`: what the streams spent (tokens, cost, agent time, runs), against
//! their budgets; `spend add` records an amount by hand; `spend reset` starts a stream's budget
//! again. The figures are every machine's, as pulled (docs/spend.md).

use std::io::Write;

use serde::Serialize;

use super::values;
use crate::error::{Error, Result};
use crate::plan::{Budget, Plan};
use crate::spend::budget::{count, duration, over, usd};
use crate::spend::ledger::By;
use crate::spend::{Amount, BudgetView, Figures, Ledger};
use crate::state::Opt;
use crate::workspace::Workspace;

/// Show what the streams spent, against their budgets.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SpendArgs {
    #[command(subcommand)]
    pub command: Option<SpendCommand>,
    /// Only this stream.
    #[arg(value_parser = values::stream_name(), add = super::complete::stream_names())]
    pub name: Option<String>,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// Only what was recorded on this UTC day or later: a date (2026-11-01) or a time ago (7d).
    #[arg(long, value_name = "D")]
    pub since: Option<String>,
    /// Sum by stream (the default, with each stream's budget), machine, model or day.
    #[arg(long, value_enum, default_value_t = By::Stream)]
    pub by: By,
}

#[derive(Debug, clap::Subcommand)]
pub enum SpendCommand {
    /// Record an amount an agent spent, for an agent git-boulder does not read by itself.
    ///
    /// The amount is recorded once per --id: running the same command again records nothing.
    /// Without --id every run records a new amount.
    Add(AddArgs),
    /// Start a stream's budget again from nothing (recorded: every machine sees it once pulled).
    Reset(ResetArgs),
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The stream that spent it (default: the stream of this worktree).
    #[arg(long, value_parser = values::stream_name(), add = super::complete::stream_names())]
    pub stream: Option<String>,
    /// Input tokens.
    #[arg(long, value_name = "N", value_parser = values::tokens(), allow_negative_numbers = true)]
    pub tokens_in: f64,
    /// Output tokens.
    #[arg(long, value_name = "N", value_parser = values::tokens(), allow_negative_numbers = true)]
    pub tokens_out: f64,
    /// What it cost in US dollars, when the agent says (wins over the price table).
    #[arg(long, value_name = "X", value_parser = values::usd(), allow_negative_numbers = true)]
    pub usd: Option<f64>,
    /// The model, as priced in settings.prices or git config boulder.price.<model>.*.
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// What identifies the amount: the same id is recorded once.
    #[arg(long, value_name = "KEY")]
    pub id: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ResetArgs {
    /// The stream whose budget starts again.
    #[arg(value_parser = values::stream_name(), add = super::complete::stream_names())]
    pub name: String,
}

pub fn run(ws: &Workspace, args: SpendArgs) -> Result<()> {
    match args.command {
        Some(SpendCommand::Add(a)) => add(ws, a),
        Some(SpendCommand::Reset(a)) => reset(ws, a),
        None => show(ws, args),
    }
}

fn add(ws: &Workspace, args: AddArgs) -> Result<()> {
    let plan = ws.plan()?;
    let stream = match &args.stream {
        Some(name) => ws.stream(&plan, name)?,
        None => ws.here_stream(&plan).ok_or_else(|| {
            Error::usage("this worktree is not a stream's: say which stream spent it")
                .hint("git boulder spend add --stream NAME --tokens-in N --tokens-out N")
        })?,
    };
    let key = match args.id {
        Some(id) if id.is_empty() || id.len() > crate::state::op::MAX_KEY || id.chars().any(char::is_control) => {
            return Err(Error::usage(format!(
                "--id: give 1 to {} bytes without control characters, e.g. the agent's message or run id",
                crate::state::op::MAX_KEY
            )))
        }
        Some(id) => id,
        None => format!("manual-{}-{:016x}", crate::time::now_rfc3339(), fastrand::u64(..)),
    };
    let amount = Amount {
        model: args.model.map_or(Opt::Absent, Opt::Set),
        usd: args.usd.map_or(Opt::Absent, Opt::Set),
        ..Amount::tokens(key.clone(), "manual", args.tokens_in as u64, args.tokens_out as u64)
    };
    let new = crate::spend::record(ws, &stream.name, vec![amount])?;
    if new == 0 {
        crate::progress::note(&format!("stream {}: {key} was recorded already; nothing new", stream.name));
    } else {
        crate::progress::note(&format!("stream {}: recorded {key}", stream.name));
    }
    Ok(())
}

fn reset(ws: &Workspace, args: ResetArgs) -> Result<()> {
    let plan = ws.plan()?;
    let stream = ws.stream(&plan, &args.name)?;
    crate::spend::reset(ws, &stream.name)?;
    crate::progress::note(&format!(
        "stream {}: its budget counts from now (recorded; `git boulder push` shares it)",
        stream.name
    ));
    Ok(())
}

/// One line of the report.
#[derive(Serialize)]
struct Group {
    name: String,
    #[serde(flatten)]
    figures: Shown,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget: Option<BudgetLine>,
}

/// Figures as printed in JSON.
#[derive(Serialize)]
pub struct Shown {
    tokens_in: u64,
    tokens_out: u64,
    cache_write: u64,
    cache_read: u64,
    /// `null` while some tokens have no price.
    usd: Option<f64>,
    /// What is known of the cost.
    usd_known: f64,
    unpriced_tokens: u64,
    seconds: u64,
    runs: u64,
}

impl From<&Figures> for Shown {
    fn from(f: &Figures) -> Shown {
        Shown {
            tokens_in: f.tokens_in,
            tokens_out: f.tokens_out,
            cache_write: f.cache_write,
            cache_read: f.cache_read,
            usd: f.usd(),
            usd_known: f.usd_micros as f64 / 1e6,
            unpriced_tokens: f.unpriced_tokens,
            seconds: f.seconds,
            runs: f.runs,
        }
    }
}

/// A budget, what it counts, and whether it is spent.
#[derive(Serialize)]
struct BudgetLine {
    #[serde(flatten)]
    view: BudgetView,
    /// Set when spent: what reached its limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    spent: Option<String>,
}

fn budget_view(b: &Budget, counted: &Figures) -> Option<BudgetLine> {
    BudgetView::of(b, counted).map(|view| BudgetLine { view, spent: over(b, counted) })
}

#[derive(Serialize)]
struct Report {
    by: By,
    since: Option<String>,
    groups: Vec<Group>,
    total: Shown,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan_budget: Option<BudgetLine>,
    /// Models whose tokens have no price.
    unpriced_models: Vec<String>,
}

fn show(ws: &Workspace, args: SpendArgs) -> Result<()> {
    let plan = ws.plan()?;
    let since = args.since.as_deref().map(since_day).transpose()?;
    let ledger = Ledger::read(ws, &plan)?;
    // A stream the plan does not name may still have spent (it was in an older plan).
    if let Some(name) = args.name.as_deref().filter(|n| plan.stream(n).is_none() && !ledger.streams.contains_key(*n)) {
        ws.stream(&plan, name)?;
    }
    let report = report(&plan, &ledger, &args, since);
    let mut out = std::io::stdout().lock();
    if args.json {
        return super::output::json(&mut out, &report);
    }
    print(&mut out, &report, &ledger, &plan, &args)
}

fn report(plan: &Plan, ledger: &Ledger, args: &SpendArgs, since: Option<String>) -> Report {
    let name = args.name.as_deref();
    let mut groups: Vec<(String, Figures)> = ledger.groups(args.by, name, since.as_deref());
    if args.by == By::Stream {
        // Every stream of the plan is listed (those that spent nothing too), in plan order.
        let mut ordered: Vec<(String, Figures)> = plan
            .streams
            .iter()
            .filter(|s| name.is_none_or(|n| n == s.name))
            .map(|s| (s.name.clone(), groups.iter().find(|(g, _)| *g == s.name).map(|(_, f)| *f).unwrap_or_default()))
            .collect();
        ordered.extend(groups.drain(..).filter(|(g, _)| plan.stream(g).is_none()));
        groups = ordered;
    }
    let mut total = Figures::default();
    groups.iter().for_each(|(_, f)| total.add(f));
    let groups = groups
        .into_iter()
        .map(|(g, f)| {
            let budget = (args.by == By::Stream)
                .then(|| plan.stream(&g).and_then(|s| budget_view(&s.budget, &ledger.current(&g))))
                .flatten();
            Group { name: g, figures: (&f).into(), budget }
        })
        .collect();
    let unpriced_models = ledger.unpriced_models(name, since.as_deref());
    Report {
        by: args.by,
        since,
        groups,
        total: (&total).into(),
        plan_budget: if name.is_none() { budget_view(&plan.settings.budget, &ledger.plan_current()) } else { None },
        unpriced_models,
    }
}

fn print(out: &mut impl Write, r: &Report, ledger: &Ledger, plan: &Plan, args: &SpendArgs) -> Result<()> {
    if !ledger.shown(plan) {
        writeln!(out, "nothing spent yet: no stream has recorded tokens, cost or agent time")?;
        return Ok(());
    }
    let first = match args.by {
        By::Stream => "stream",
        By::Machine => "machine",
        By::Model => "model",
        By::Day => "day",
    };
    let with_budget = args.by == By::Stream;
    let mut header = vec![first, "tokens in", "tokens out", "cache write", "cache read", "cost", "time", "runs"];
    if with_budget {
        header.push("budget");
    }
    let line = |name: &str, f: &Shown, budget: Option<&BudgetLine>| {
        let mut row = vec![
            name.to_string(),
            count(f.tokens_in),
            count(f.tokens_out),
            count(f.cache_write),
            count(f.cache_read),
            cost(f),
            duration(f.seconds),
            count(f.runs),
        ];
        if with_budget {
            row.push(budget.map_or_else(|| "-".to_string(), budget_text));
        }
        row
    };
    let mut rows: Vec<Vec<String>> = r.groups.iter().map(|g| line(&g.name, &g.figures, g.budget.as_ref())).collect();
    if args.name.is_none() {
        rows.push(line("total", &r.total, r.plan_budget.as_ref()));
    }
    super::output::table(out, &header, &rows, |col, cell| {
        (with_budget && col == header.len() - 1 && cell.ends_with("SPENT")).then_some("31")
    })?;
    for m in &r.unpriced_models {
        writeln!(
            out,
            "cost unknown: no price for model {m}: add it to the plan's settings.prices, or `git config boulder.price.{m}.input 3.00` (and .output, .cache_write, .cache_read; US dollars per million tokens)"
        )?;
    }
    Ok(())
}

/// The cost column: dollars, or `unknown` (with what is known) while tokens lack a price.
fn cost(f: &Shown) -> String {
    match f.usd {
        Some(v) => usd(v),
        None if f.usd_known > 0.0 => format!("{}+unknown", usd(f.usd_known)),
        None => "unknown".into(),
    }
}

/// The budget column: each limit against what it counts, `SPENT` once one is reached.
fn budget_text(b: &BudgetLine) -> String {
    let mut text = b.view.text();
    if b.spent.is_some() {
        text.push_str(" SPENT");
    }
    text
}

/// `--since`: a day (`2026-11-01`) or a time ago (`7d`, `12h`), as the UTC day it falls on.
fn since_day(text: &str) -> Result<String> {
    let t = text.trim();
    let bad = || {
        Error::usage(format!("--since: {t:?} is neither a date (2026-11-01) nor a time ago (7d, 12h)"))
            .hint("git boulder spend --since 7d")
    };
    if t.len() == 10 && crate::time::parse_rfc3339(&format!("{t}T00:00:00Z")).is_some() {
        return Ok(t.to_string());
    }
    let ago = crate::time::parse_duration(t).map_err(|_| bad())?;
    let at = crate::time::now_secs() - ago.as_secs_f64();
    let day = crate::time::format_secs(at);
    Ok(day.get(..10).ok_or_else(bad)?.to_string())
}
