//! The crate graph against ARCHITECTURE.md: every crate has a layer, every dependency points to a
//! lower one, and nothing that ships (`functions/`, `shared/`, `sidestream/`) depends on what
//! emulates AWS (`dev/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// ARCHITECTURE.md's layer table: crate folder (`shared/io-policy`) → layer.
fn layers() -> BTreeMap<String, u32> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    text.lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let layer = cells.next()?.parse().ok()?;
            let folder = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            Some((folder.to_owned(), layer))
        })
        .collect()
}

/// The workspace's crates: folder → the internal crates (by package name) of its `[dependencies]`.
fn crates() -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    for group in ["functions", "shared", "dev", "sidestream"] {
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

#[test]
fn every_crate_has_a_layer_and_depends_only_downwards_and_nothing_that_ships_depends_on_dev() {
    let layers = layers();
    let crates = crates();
    assert!(crates.len() >= 30, "found only {} crates", crates.len());
    let by_name: BTreeMap<&str, &str> = crates
        .iter()
        .map(|(folder, (name, _))| (name.as_str(), folder.as_str()))
        .collect();
    let mut problems = Vec::new();
    let mut edges = 0;
    for (folder, (_, dependencies)) in &crates {
        let Some(&layer) = layers.get(folder) else {
            problems.push(format!("{folder} is not in ARCHITECTURE.md's layer table"));
            continue;
        };
        for dependency in dependencies {
            let Some(&target) = by_name.get(dependency.as_str()) else {
                continue;
            };
            edges += 1;
            let below = layers.get(target).copied().unwrap_or(u32::MAX);
            if below >= layer {
                problems.push(format!(
                    "{folder} (layer {layer}) depends on {target} (layer {below})"
                ));
            }
            if !folder.starts_with("dev/") && target.starts_with("dev/") {
                problems.push(format!(
                    "{folder} ships, and depends on {target}, which emulates AWS"
                ));
            }
        }
    }
    for folder in layers.keys() {
        if !crates.contains_key(folder) {
            problems.push(format!("ARCHITECTURE.md lists {folder}, which is not a crate"));
        }
    }
    assert!(edges >= 60, "read only {edges} internal dependencies");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
