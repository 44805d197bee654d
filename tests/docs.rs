//! The repository's documents: the README stays short enough to read, every relative link in
//! the Markdown documents leads somewhere (a file that is there, a heading that is there), and
//! `doc/accel.md` is what the binary writes today.
//!
//! Here rather than as unit tests: they check the repository's files against each other and
//! against the binary a user runs (`accel --generate markdown`), and they read the files when
//! they run, so that editing a document recompiles nothing.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::ACCEL;

const REPOSITORY: &str = env!("CARGO_MANIFEST_DIR");

/// The most the README may hold, in bytes: a newcomer reads it through; the rest is linked.
const README_AT_MOST: u64 = 25 * 1024;

#[test]
fn the_readme_is_at_most_25_kib() {
    let size = fs::metadata(Path::new(REPOSITORY).join("README.md")).unwrap().len();
    assert!(
        size <= README_AT_MOST,
        "README.md is {size} bytes, more than {README_AT_MOST}: move the detail to GUIDE.md"
    );
}

#[test]
fn every_relative_link_resolves() {
    let documents = documents();
    for needed in ["README.md", "GUIDE.md", "FAULTS.md", "DESIGN.md", "DEVELOPERS.md"] {
        let path = Path::new(REPOSITORY).join(needed);
        assert!(documents.contains(&path), "{needed} is not among the documents checked");
    }
    let mut broken = Vec::new();
    for document in &documents {
        let text = fs::read_to_string(document).unwrap();
        for target in links(&text) {
            if let Err(why) = resolve(document, &target) {
                let name = document.strip_prefix(REPOSITORY).unwrap().display();
                broken.push(format!("{name}: ({target}): {why}"));
            }
        }
    }
    assert!(broken.is_empty(), "links that lead nowhere:\n{}", broken.join("\n"));
}

/// `doc/accel.md` is the man page as Markdown, for readers of the repository; it is written by
/// the binary, never by hand, and this fails when it is stale.
#[test]
fn the_reference_is_what_the_binary_writes() {
    let out = Command::new(ACCEL).args(["--generate", "markdown"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written = String::from_utf8(out.stdout).unwrap();
    let kept = fs::read_to_string(Path::new(REPOSITORY).join("doc/accel.md")).unwrap();
    assert!(
        written == kept,
        "doc/accel.md is stale; write it anew: cargo run -q -- --generate markdown > doc/accel.md"
    );
}

/// The links checker finds links outside code only, and reads a heading as GitHub does.
#[test]
fn the_link_checker_reads_markdown_as_github_does() {
    let text = "# Beyond RAM: `--spill`\n\
                See [the spill](#beyond-ram---spill) and [b](B.md#x \"title\").\n\
                Not `[code](nowhere)`, nor in a span\nthat `goes [on](x)\nover` lines.\n\
                ```sh\n# not a heading\n[nor](here)\n```\n\
                [defined]: C.md\n";
    assert_eq!(links(text), ["#beyond-ram---spill", "B.md#x", "C.md"]);
    assert_eq!(
        anchors(text).into_iter().collect::<Vec<_>>(),
        ["beyond-ram---spill"],
        "a heading inside a fence is none"
    );
    let twice = "## Options\n### Options\n#### `-o`, `--output FILE`\n## zfs_autobackup, *now*\n";
    assert_eq!(
        anchors(twice),
        BTreeSet::from(
            ["options", "options-1", "-o---output-file", "zfs_autobackup-now"].map(String::from)
        )
    );
}

/// The Markdown files at the top of the repository, in `doc/` and in `bench/` (not below:
/// `bench/work/` holds the benchmark's scratch copies).
fn documents() -> Vec<PathBuf> {
    let mut documents = Vec::new();
    for folder in ["", "doc", "bench"] {
        let Ok(entries) = fs::read_dir(Path::new(REPOSITORY).join(folder)) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|extension| extension == "md") {
                documents.push(path);
            }
        }
    }
    documents.sort();
    documents
}

/// Whether `target`, a link in `document`, leads somewhere: nothing for a link to the web; a
/// file or folder that exists, and a heading of that file for a `#fragment`.
fn resolve(document: &Path, target: &str) -> Result<(), String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        document.to_path_buf()
    } else {
        document.parent().unwrap().join(path)
    };
    if !file.exists() {
        return Err(format!("{} does not exist", file.display()));
    }
    if fragment.is_empty() {
        return Ok(());
    }
    if file.extension().is_none_or(|extension| extension != "md") {
        return Err("a #fragment of a file that is not Markdown".to_owned());
    }
    let anchors = anchors(&fs::read_to_string(&file).unwrap());
    if anchors.contains(fragment) {
        Ok(())
    } else {
        Err(format!("no heading of {} makes #{fragment}", file.display()))
    }
}

/// `text` without its fenced code blocks, their lines left empty.
fn outside_fences(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                ""
            } else if fenced {
                ""
            } else {
                line
            }
        })
        .collect()
}

/// The targets of the links in `text`: inline links and images, `[text](target "title")`, and
/// definitions, `[name]: target`; not in code, fenced or in a span (which may go over lines).
fn links(text: &str) -> Vec<String> {
    let prose = outside_fences(text).join("\n");
    // What is outside code spans: every other piece between backticks.
    let outside_code: String = prose.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    let mut targets = Vec::new();
    let mut rest = outside_code.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.to_owned());
        rest = &rest[end..];
    }
    for line in outside_code.lines() {
        if let Some(definition) = line.trim_start().strip_prefix('[')
            && let Some((_, target)) = definition.split_once("]: ")
        {
            targets.push(target.trim().to_owned());
        }
    }
    targets
}

/// The `#fragments` that the headings of `text` make, as GitHub makes them: the heading's
/// text without its markup, in lower case, keeping letters, digits, `-`, `_` and spaces, each
/// space a `-`; a fragment made again gets `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    for line in outside_fences(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let heading = line[hashes..].trim().trim_end_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = slug.clone();
        let mut again = 0;
        while anchors.contains(&anchor) {
            again += 1;
            anchor = format!("{slug}-{again}");
        }
        anchors.insert(anchor);
    }
    anchors
}
