//! `sidestream index backfill` and `index rebuild`: existing items brought into the index by
//! touching them (`index_backfill`), the rebuilt index's table created first; a progress bar
//! and a summary for people or as JSON.

use std::io::{self, Write as _};
use std::process::ExitCode;

use operations::backfill::{Backfill, Checkpoint, Counts, Settings, Target, new_run_id};
use operations::{progress, verify};
use stream_runtime::Vars;

use crate::args::{BackfillArgs, Output};

pub(crate) fn run(args: BackfillArgs, rebuild: bool) -> anyhow::Result<ExitCode> {
    let BackfillArgs {
        table,
        index,
        segments,
        page_size,
        read_units,
        write_units,
        checkpoint: path,
        dry_run,
        output,
    } = args;
    for (flag, rate) in [("--read-units", read_units), ("--write-units", write_units)] {
        if let Some(rate) = rate {
            anyhow::ensure!(
                rate.is_finite() && rate > 0.0,
                "{flag} must be a positive number of units per second, not {rate}"
            );
        }
    }
    let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&Vars::process_lookup))?;
    let target = Target::new(&table, &indexes, index.as_deref())?;
    let to_create = match (rebuild, index.as_deref()) {
        (false, _) => None,
        (true, Some(name)) => Some(verify::choose(&indexes, Some(name))?.clone()),
        (true, None) => {
            anyhow::bail!("index rebuild needs --index: the index whose table to create and fill")
        }
    };
    let mut checkpoint = match (dry_run, Checkpoint::load(&path)?) {
        (false, Some(saved)) => {
            saved.matches(&table, &target.sources, segments).map_err(|why| {
                anyhow::anyhow!(
                    "the checkpoint {} is for another backfill: {why}; remove it to start afresh",
                    path.display()
                )
            })?;
            saved
        }
        _ => Checkpoint::new(&table, &new_run_id(), &target.sources, segments),
    };
    let resumed = checkpoint.counts().scanned > 0;
    let settings = Settings {
        page_size,
        read_units_per_second: read_units,
        write_units_per_second: write_units,
        dry_run,
        ..Settings::default()
    };
    crate::runtime()?.block_on(async {
        let sdk = crate::sdk().await?;
        let client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
        let mut created = None;
        if let Some(index) = to_create.as_ref().filter(|_| !dry_run) {
            created = Some(operations::backfill::rebuild::create_index_table(&client, index).await?);
            if output == Output::Text {
                eprintln!(
                    "{}: table {} {}",
                    index.name,
                    index.table,
                    if created == Some(true) { "created" } else { "exists; filling it" }
                );
            }
        }
        let total = verify::estimated_items(&client, &table).await;
        let backfill = Backfill::new(client, target, settings);
        let mut bar = (output == Output::Text).then(|| progress::Bar::new("items"));
        let mut progress = |counts: &Counts| {
            if let Some(bar) = &mut bar {
                let extra = format!(" {} touched", counts.touched);
                bar.show(counts.scanned, total.max(counts.scanned), &extra, false);
            }
        };
        let mut save = |c: &Checkpoint| if dry_run { Ok(()) } else { c.save(&path) };
        let result = backfill.run(&mut checkpoint, &mut save, &mut progress).await;
        let counts = checkpoint.counts();
        if let Some(bar) = &mut bar {
            bar.show(counts.scanned, counts.scanned, "", true);
        }
        result?;
        let summary = Summary {
            table: &table,
            run_id: &checkpoint.run_id,
            segments,
            dry_run,
            resumed,
            counts,
            untouchable: checkpoint.untouchable(),
            created,
            checkpoint: (!dry_run).then(|| path.display().to_string()),
        };
        summary.print(output)?;
        Ok(summary.exit_code())
    })
}

/// What a backfill did, for its last words.
struct Summary<'a> {
    table: &'a str,
    run_id: &'a str,
    segments: u32,
    dry_run: bool,
    resumed: bool,
    counts: Counts,
    /// The keys of the items that could not be touched.
    untouchable: Vec<serde_json::Value>,
    created: Option<bool>,
    checkpoint: Option<String>,
}

impl Summary<'_> {
    /// 1 when items were left out of the index (they need an operator), else 0.
    fn exit_code(&self) -> ExitCode {
        if self.untouchable.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
    }

    fn print(&self, output: Output) -> io::Result<()> {
        let mut out = io::stdout().lock();
        match output {
            Output::Json => {
                let doc = serde_json::json!({
                    "table": self.table, "run_id": self.run_id, "segments": self.segments, "dry_run": self.dry_run,
                    "resumed": self.resumed, "counts": self.counts, "untouchable": self.untouchable,
                    "table_created": self.created, "checkpoint": self.checkpoint,
                });
                writeln!(out, "{doc}")?;
            }
            Output::Text => {
                let verb = if self.dry_run { "would touch" } else { "touched" };
                writeln!(
                    out,
                    "{}: {} items scanned in {} segments{}; {verb} {}, {} already touched or gone, {} with nothing to index",
                    self.table,
                    self.counts.scanned,
                    self.segments,
                    if self.resumed { " (resumed)" } else { "" },
                    self.counts.touched,
                    self.counts.already,
                    self.counts.unindexed,
                )?;
                writeln!(
                    out,
                    "capacity: {:.1} read units, {:.1} write units{}",
                    self.counts.read_units,
                    self.counts.write_units,
                    if self.dry_run { " (writes estimated)" } else { "" }
                )?;
                if !self.untouchable.is_empty() {
                    writeln!(
                        out,
                        "{} ITEMS COULD NOT BE TOUCHED (at DynamoDB's item size limit, they cannot take the \
                         marker) and are not indexed; see docs/operations.md#items-a-backfill-cannot-touch:",
                        self.untouchable.len()
                    )?;
                    for key in &self.untouchable {
                        writeln!(out, "  {key}")?;
                    }
                }
                if !self.dry_run {
                    writeln!(
                        out,
                        "run {}: the indexer puts the touched items' entries as the stream delivers them; \
                     then `sidestream index verify --table {}`",
                        self.run_id, self.table
                    )?;
                }
            }
        }
        Ok(())
    }
}
