//! One template block per stream function: `template.yaml` is `deploy/template.yaml.in` with each
//! stream function's `functions/<crate>/template.yaml.in` spliced in (`scripts/template-build`),
//! so a function added through its block is everywhere the template names a stream function.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};
use local_stack::template::Template;

use crate::support::moto::unique;
use crate::support::template::{names, set};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where the scratch copy's `cargo check` compiles: a folder of its own, not the workspace's
/// `target` (the `cargo test` running this test holds that one's lock, and the scratch's crates
/// would replace the workspace's under their names), kept once per machine beside
/// `scripts/setup`'s tools (`${XDG_CACHE_HOME:-~/.cache}/sidestream/throwaway-target`) so that a
/// fresh clone does not check the AWS SDK again: the first run on a machine does, about 160 s of
/// CPU here. cargo's lock on it makes concurrent runs take turns; `rm -rf` it to reclaim its
/// space (about 450 MB). Without `HOME`, `target/throwaway`.
fn throwaway_target() -> PathBuf {
    let cache =
        std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| {
            std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache"))
        });
    cache.map_or_else(|| repo().join("target/throwaway"), |c| c.join("sidestream/throwaway-target"))
}

/// `scripts/template-build` on the tree at `root`, checking only with `check`.
fn template_build(root: &Path, check: bool) -> Result<Output> {
    let mut command = Command::new("python3");
    command.arg(repo().join("scripts/template-build")).arg("--root").arg(root);
    if check {
        command.arg("--check");
    }
    command.output().context("running scripts/template-build")
}

/// The committed template is what the base and the blocks make: an edit of `template.yaml`
/// alone, which the next build would lose, fails here, saying what to run.
#[test]
fn the_template_is_what_the_base_and_the_blocks_make() -> Result<()> {
    let out = template_build(&repo(), true)?;
    ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// A copy of the repository's files (those git tracks or would, as they stand), without its
/// build output: a scratch tree to add a function to.
fn scratch_copy() -> Result<PathBuf> {
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(repo())
        .output()?;
    ensure!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let scratch = std::env::temp_dir().join(unique("template-blocks"));
    for file in listed.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let file = Path::new(std::str::from_utf8(file)?);
        let (from, to) = (repo().join(file), scratch.join(file));
        if from.is_file() {
            std::fs::create_dir_all(to.parent().context("a file's folder")?)?;
            std::fs::copy(&from, &to)?;
        }
    }
    Ok(scratch)
}

/// The throwaway function's crate: a stream function that plans nothing and writes nothing, its
/// binary wired as every function's is.
const THROWAWAY_MANIFEST: &str = r#"[package]
name = "throwaway-function"
version = "0.0.0"
edition.workspace = true

[package.metadata.lambda-build.env]
THROWAWAY = "1"

[dependencies]
stream-runtime.workspace = true
tokio.workspace = true

[lints]
workspace = true
"#;

const THROWAWAY_LIB: &str = r#"//! A throwaway: the smallest stream function, which takes every record and writes nothing.

use stream_runtime::{Applied, Aws, Budget, ConfigError, Planned, StreamFunction, Vars, WireRecord};

/// Takes every record and writes nothing.
pub struct Throwaway;

impl StreamFunction for Throwaway {
    const NAME: &'static str = "throwaway-function";
    const STREAM_VIEWS: &'static [&'static str] = &["NEW_AND_OLD_IMAGES"];
    type Plan = usize;

    fn init(_vars: &Vars<'_>, _aws: &Aws) -> Result<Throwaway, ConfigError> {
        Ok(Throwaway)
    }

    fn plan(&self, records: &[WireRecord<'_>]) -> Planned<usize> {
        Planned { plan: records.len(), failures: Vec::new(), counts: Vec::new() }
    }

    async fn apply(&self, _plan: usize, _budget: &Budget) -> Applied {
        Applied::default()
    }
}
"#;

const THROWAWAY_MAIN: &str = r"//! The throwaway Lambda.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::main::<throwaway_function::Throwaway>().await
}
";

/// Replaces the one `anchor` in the file at `path` with `with`, or says it is not there.
fn edit(path: &Path, anchor: &str, with: &str) -> Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    ensure!(text.matches(anchor).count() == 1, "{} has no one {anchor:?}", path.display());
    std::fs::write(path, text.replace(anchor, with))?;
    Ok(())
}

/// A fifth stream function, added in a scratch copy of the repository in three places: its crate
/// (a package with a binary under `functions/`), its registry entry (`FUNCTIONS`, and the
/// registry crate's dependency on it) and its block (the aggregator's, with its names changed).
/// The registry compiles with it (`cargo check`, offline, in [`throwaway_target`]); `scripts/lambda-build` lists it among the stream functions it
/// builds and starts with the canary; the built template has its log group, role and function,
/// the alarms its nested stack makes, its outputs and dashboard widgets, and its alias in the
/// roles that deploy it (the pre-traffic hook's and `CodeDeploy`'s); and the local stack finds it
/// among the functions to run. A block whose section has no place in the base is refused,
/// naming it.
#[test]
fn a_function_added_through_its_crate_and_block_is_everywhere_the_tools_look() -> Result<()> {
    let scratch = scratch_copy()?;
    let crate_folder = scratch.join("functions/throwaway-function");
    std::fs::create_dir_all(crate_folder.join("src"))?;
    std::fs::write(crate_folder.join("Cargo.toml"), THROWAWAY_MANIFEST)?;
    std::fs::write(crate_folder.join("src/lib.rs"), THROWAWAY_LIB)?;
    std::fs::write(crate_folder.join("src/main.rs"), THROWAWAY_MAIN)?;
    let registry = scratch.join("functions/sidestream-combined");
    edit(
        &registry.join("Cargo.toml"),
        "\n[dependencies]\n",
        "\n[dependencies]\nthrowaway-function = { path = \"../throwaway-function\" }\n",
    )?;
    let last = r#"Function::of::<counter_aggregator::Aggregator>("the sharded counters' totals", "AggregatorFunction"),"#;
    let entry = r#"Function::of::<throwaway_function::Throwaway>("nothing", "ThrowawayFunction"),"#;
    edit(&registry.join("src/lib.rs"), last, &format!("{last}\n    {entry}"))?;
    let aggregator = std::fs::read_to_string(repo().join("functions/counter-aggregator/template.yaml.in"))?;
    let throwaway = aggregator
        .replace("counter-aggregator", "throwaway-function")
        .replace("Aggregator", "Throwaway")
        .replace("# order: 40", "# order: 50");
    std::fs::write(crate_folder.join("template.yaml.in"), &throwaway)?;

    // The registry compiles with the new entry (the lock takes the new package offline: it
    // depends only on what the workspace has), then the build's list has it.
    // Niced: the other tests' invocations run to their deadlines beside it. Without the
    // `RUSTC_BOOTSTRAP` scripts/test-runner gives this process for libtest's times: cargo would
    // check every crate again under it (146 s in CI), and again without it the next time.
    let checked = Command::new("nice")
        .args(["-n", "10", env!("CARGO"), "check", "--offline", "--quiet", "-p", "sidestream-combined"])
        .env("CARGO_TARGET_DIR", throwaway_target())
        .env_remove("RUSTC_BOOTSTRAP")
        .current_dir(&scratch)
        .output()?;
    ensure!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    let listed = Command::new("bash").arg(scratch.join("scripts/lambda-build")).arg("--list").output()?;
    let listed = String::from_utf8_lossy(&listed.stdout);
    ensure!(
        listed.lines().any(|l| l == "throwaway-function stream"),
        "scripts/lambda-build --list: {listed}"
    );

    let out = template_build(&scratch, false)?;
    ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(scratch.join("template.yaml"))?;
    let template = Template::parse_with(&text, &mut |location| {
        std::fs::read_to_string(scratch.join(location)).map_err(|e| e.to_string())
    })?;
    let resolver = template.resolver(&set(&[]), names());
    // Its own resources, its nested stack's alarms, and the aggregator's still beside them.
    let kinds = ["LogGroup", "Role", "Function", "ErrorsAlarm", "MappingStoppedAlarm"];
    let ids = kinds.iter().map(|kind| format!("Throwaway{kind}")).chain(["AggregatorFunction".to_owned()]);
    for id in ids {
        ensure!(resolver.resource_exists(&id)?, "{id} is not in the built template");
    }
    let resources = &template.root()["Resources"];
    let deployers = [("PreTrafficHookRole", 1), ("CodeDeployRole", 2)];
    for (role, places) in deployers {
        let policy = resources[role].to_string();
        let named = policy.matches("ThrowawayFunction").count();
        ensure!(
            named == places,
            "{role} names the new function's alias {named} times, not {places}: {policy}"
        );
    }
    let dashboard = resources["Dashboard"].to_string();
    ensure!(
        dashboard.contains(r#"{"Ref":"ThrowawayFunction"}"#),
        "no widget of the new function: {dashboard}"
    );
    let outputs = &template.root()["Outputs"];
    ensure!(outputs["ThrowawayFunction"].is_object() && outputs["ThrowawayMapping"].is_object(), "{outputs}");
    let functions = template.functions(&resolver)?;
    let found = functions
        .iter()
        .find(|f| f.logical_id == "ThrowawayFunction")
        .context("the local stack's functions")?;
    ensure!(found.binary.as_deref() == Some("throwaway-function"), "{found:?}");

    // A section the base has no place for is refused, naming the block and the section.
    std::fs::write(crate_folder.join("template.yaml.in"), format!("{throwaway}# @section widgets\n"))?;
    let refused = template_build(&scratch, false)?;
    let said = String::from_utf8_lossy(&refused.stderr);
    ensure!(
        refused.status.code() == Some(2) && said.contains("throwaway-function") && said.contains("widgets"),
        "{said}"
    );
    std::fs::remove_dir_all(&scratch)?;
    Ok(())
}

/// The three places a stream function takes agree: every package with a binary under
/// `functions/` (what `scripts/lambda-build` builds) has a block, every block's function is
/// such a package, and every function of the registry (`sidestream_combined::FUNCTIONS`) is one
/// of them under its template logical id, as is the combined binary.
#[test]
fn each_function_is_a_crate_a_registry_entry_and_a_block() -> Result<()> {
    let metadata = Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1", "--locked", "--offline"])
        .current_dir(repo())
        .output()?;
    ensure!(metadata.status.success(), "{}", String::from_utf8_lossy(&metadata.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout)?;
    let functions = repo().join("functions").canonicalize()?;
    let mut crates = std::collections::BTreeSet::new();
    for package in metadata["packages"].as_array().context("packages")? {
        let manifest = Path::new(package["manifest_path"].as_str().context("a manifest")?);
        let binary = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["kind"] == serde_json::json!(["bin"]));
        if binary && manifest.parent().and_then(Path::parent) == Some(functions.as_path()) {
            crates.insert(package["name"].as_str().context("a name")?.to_owned());
        }
    }
    let mut blocks = std::collections::BTreeMap::new();
    for name in &crates {
        let path = functions.join(name).join("template.yaml.in");
        let block = std::fs::read_to_string(&path)
            .with_context(|| format!("{name} has no block: {}", path.display()))?;
        let binary = format!("Binary: {name}\n");
        ensure!(block.contains(&binary), "{}: its function is not built from {name}", path.display());
        blocks.insert(name.clone(), block);
    }
    for entry in std::fs::read_dir(&functions)? {
        let folder = entry?.path();
        let name = folder.file_name().and_then(|n| n.to_str()).context("a folder's name")?.to_owned();
        ensure!(
            !folder.join("template.yaml.in").exists() || crates.contains(&name),
            "functions/{name} has a block but no binary"
        );
    }
    let registered = sidestream_combined::FUNCTIONS
        .iter()
        .map(|f| (f.name, f.logical_id))
        .chain([(sidestream_combined::COMBINED_BINARY, sidestream_combined::COMBINED_LOGICAL_ID)]);
    let mut seen = 0;
    for (name, logical_id) in registered {
        let block = blocks
            .get(name)
            .with_context(|| format!("{name} is in the registry but not a crate with a block"))?;
        ensure!(block.contains(&format!("\n  {logical_id}:\n")), "{name}'s block has no {logical_id}");
        seen += 1;
    }
    ensure!(
        seen == blocks.len(),
        "blocks without a registry entry: {seen} registered of {:?}",
        blocks.keys()
    );
    Ok(())
}
