//! The crate graph against ARCHITECTURE.md: the folders are the layers, every dependency points
//! to the crate's own folder or a lower one, nothing that ships depends on what emulates AWS
//! (`dev/`), every crate has its heading in "Crates, bottom up", and the oracle shares no code
//! with the indexer; and every build asks for one feature set of the crates all builds share.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap()
}

/// ARCHITECTURE.md's layout table: folder (`shared`) → layer.
fn layers() -> BTreeMap<String, u32> {
    architecture()
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let layer = cells.next()?.parse().ok()?;
            let folder = cells.next()?.strip_prefix('`')?.strip_suffix("/`")?;
            Some((folder.to_owned(), layer))
        })
        .collect()
}

/// The crate folders ARCHITECTURE.md's "Crates, bottom up" names: every folder in backticks in a
/// third-level heading of that section, such as `shared/io-policy`.
fn listed_crates() -> Vec<String> {
    let text = architecture();
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Crates, bottom up"))
        .expect("ARCHITECTURE.md has a \"Crates, bottom up\" section");
    section
        .lines()
        .filter_map(|line| line.strip_prefix("### "))
        .flat_map(|heading| heading.split('`').skip(1).step_by(2).map(str::to_owned).collect::<Vec<_>>())
        .filter(|folder| !folder.ends_with('/'))
        .collect()
}

/// The workspace's crates that ship or emulate: folder → (package name, the internal crates of
/// its `[dependencies]`).
fn crates() -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    for group in ["shared", "functions", "ops", "sidestream", "dev"] {
        let dirs: Vec<PathBuf> = if group == "sidestream" {
            vec![root().join(group)]
        } else {
            std::fs::read_dir(root().join(group))
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .filter(|path| path.join("Cargo.toml").exists())
                .collect()
        };
        for dir in dirs {
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|rest| rest.strip_suffix('"'))
                .unwrap()
                .to_owned();
            let dependencies = manifest
                .split("\n[")
                .find(|section| section.starts_with("dependencies]"))
                .map(|section| {
                    section
                        .lines()
                        .skip(1)
                        .filter_map(|l| l.split(['.', ' ', '=']).next())
                        .filter(|n| !n.is_empty() && !n.starts_with('#'))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let folder = dir.strip_prefix(root()).unwrap().display().to_string();
            out.insert(folder, (name, dependencies));
        }
    }
    out
}

/// The folder a crate's folder is in (`shared/io-policy` → `shared`; `sidestream` → itself).
fn group(folder: &str) -> &str {
    folder.split('/').next().unwrap_or(folder)
}

#[test]
fn the_folders_are_the_layers_and_nothing_that_ships_depends_on_dev() {
    let layers = layers();
    let crates = crates();
    assert!(layers.len() == 5, "ARCHITECTURE.md's layout table: {layers:?}");
    assert!(crates.len() >= 15, "found only {} crates", crates.len());
    let by_name: BTreeMap<&str, &str> =
        crates.iter().map(|(folder, (name, _))| (name.as_str(), folder.as_str())).collect();
    let mut problems = Vec::new();
    let mut edges = 0;
    for (folder, (_, dependencies)) in &crates {
        let Some(&layer) = layers.get(group(folder)) else {
            problems.push(format!("{folder}: its folder is not in ARCHITECTURE.md's layout table"));
            continue;
        };
        for dependency in dependencies {
            let Some(&target) = by_name.get(dependency.as_str()) else {
                continue;
            };
            edges += 1;
            let below = layers[group(target)];
            if below > layer {
                problems.push(format!(
                    "{folder} (layer {layer}) depends on {target} (layer {below}), a folder above it"
                ));
            }
            if group(folder) != "dev" && group(target) == "dev" {
                problems.push(format!("{folder} ships, and depends on {target}, which emulates AWS"));
            }
        }
    }
    let listed = listed_crates();
    for folder in crates.keys() {
        if !listed.contains(folder) {
            problems.push(format!("{folder} has no heading in ARCHITECTURE.md's \"Crates, bottom up\""));
        }
    }
    for folder in &listed {
        if !crates.contains_key(folder) {
            problems.push(format!("ARCHITECTURE.md lists {folder}, which is not a crate"));
        }
    }
    assert!(edges >= 30, "read only {edges} internal dependencies");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The oracle that checks the index must not reuse the indexer's planning code: a bug in the
/// plan would then be in the check too. It shares the index's definitions (`formats`) only.
#[test]
fn the_oracle_shares_no_code_with_the_indexer() {
    let dir = root().join("ops/operations/src");
    let mut files = vec![dir.join("oracle.rs")];
    if let Ok(entries) = std::fs::read_dir(dir.join("oracle")) {
        files.extend(entries.map(|e| e.unwrap().path()));
    }
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if name == "tests.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect();
        for forbidden in ["multikey_indexer", "formats::entries", "has_entry"] {
            assert!(!code.contains(forbidden), "{}: uses {forbidden}", file.display());
        }
    }
}

/// Each registry crate a build compiles, with the features it compiles it with: `cargo tree` in
/// `dir` (the whole workspace, or the example's own) over the dependency `kinds`, one
/// "name version [features]" line each; the path crates (the workspace's own) left out.
fn feature_sets(dir: &Path, kinds: &str) -> BTreeSet<String> {
    let mut command = std::process::Command::new(env!("CARGO"));
    command.args(["tree", "--offline", "--locked", "--prefix", "none", "-f", "{p} [{f}]", "-e", kinds]);
    if dir == root() {
        command.arg("--workspace");
    }
    let out = command.current_dir(dir).output().unwrap();
    assert!(
        out.status.success(),
        "cargo tree in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|line| !line.is_empty() && !line.contains(" (/"))
        .map(|line| line.trim_end_matches(" (*)").to_owned())
        .collect()
}

/// A build without tests (`cargo build --workspace --bins`, as `scripts/demo` builds) and the
/// example's tests outside the workspace compile every crate they share with the tests with the
/// tests' features and profile, so that one compilation of the AWS SDK in `target/` serves all
/// three (`dev/workspace-hack`): a feature only a dev-dependency turns on compiles serde, and
/// everything above it, a second time, and so does another profile.
#[test]
fn every_build_asks_for_the_features_the_tests_ask_for() {
    let tests = feature_sets(&root(), "normal,build,dev");
    assert!(tests.len() > 200, "read only {} crates", tests.len());
    let builds = [
        ("a build without tests", feature_sets(&root(), "normal,build")),
        ("the example's tests", feature_sets(&root().join("examples/sqs-fifo-mirror"), "normal,build,dev")),
    ];
    let dev_profile = |manifest: &Path| -> Vec<String> {
        let text = std::fs::read_to_string(manifest).unwrap();
        let mut section = String::new();
        let mut lines = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            if line.starts_with('[') {
                section = line.to_owned();
            } else if section.starts_with("[profile.dev") {
                lines.push(format!("{section} {line}"));
            }
        }
        lines
    };
    let workspace = dev_profile(&root().join("Cargo.toml"));
    assert!(!workspace.is_empty(), "the workspace has a [profile.dev]");
    assert_eq!(
        dev_profile(&root().join("examples/sqs-fifo-mirror/Cargo.toml")),
        workspace,
        "the example's dev profile is the workspace's: another compiles every crate again"
    );
    for (what, crates) in builds {
        let other: Vec<&String> = crates.difference(&tests).collect();
        assert!(
            other.is_empty(),
            "{what} compiles these with other features than the tests do (add the tests' to dev/workspace-hack): {other:#?}"
        );
    }
}
