//! `git boulder demo [DIR]`: the whole flow on an embedded sample project, narrated.
//!
//! The demo plays the user: it runs `git` and `git boulder` as a person would type them, in DIR
//! (a new temporary directory when none is given), and leaves DIR to explore.

use std::path::PathBuf;
use std::process::Command;

use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Where to build the sample repository (must be empty or absent); default: a new temp dir.
    pub dir: Option<PathBuf>,
}

/// The sample project, embedded from `fixtures/demo/project`.
const PROJECT: &[(&str, &str)] = &[
    (".agents/tasks/prd.md", include_str!("../../fixtures/demo/project/.agents/tasks/prd.md")),
    (".boulder/streams.yaml", include_str!("../../fixtures/demo/project/.boulder/streams.yaml")),
    ("README.md", include_str!("../../fixtures/demo/project/README.md")),
    ("docs/index.md", include_str!("../../fixtures/demo/project/docs/index.md")),
    ("src/api/README.txt", include_str!("../../fixtures/demo/project/src/api/README.txt")),
    ("src/auth/README.txt", include_str!("../../fixtures/demo/project/src/auth/README.txt")),
];

pub fn run(args: DemoArgs, quiet: bool) -> Result<()> {
    let dir = match args.dir {
        Some(d) => {
            if d.exists() && std::fs::read_dir(&d)?.next().is_some() {
                return Err(Error::usage(format!("{} is not empty", d.display()))
                    .hint("give the demo an empty or new directory, or none for a temporary one"));
            }
            std::fs::create_dir_all(&d)?;
            std::fs::canonicalize(&d)?
        }
        None => tempfile::Builder::new().prefix("git-boulder-demo-").tempdir()?.keep(),
    };
    let demo = Demo { dir: dir.join("notes"), quiet };
    std::fs::create_dir_all(&demo.dir)?;
    demo.say(&format!("Building a sample project in {}", demo.dir.display()));
    for (path, text) in PROJECT {
        let p = demo.dir.join(path);
        std::fs::create_dir_all(p.parent().expect("embedded paths have a parent"))?;
        std::fs::write(&p, text)?;
    }
    demo.git(&["init", "-q", "-b", "main"])?;
    demo.git(&["add", "-A"])?;
    demo.git(&["commit", "-q", "-m", "Sample project with a PRD and a stream plan"])?;

    demo.step("1. Check the stream plan against the PRD and the tree", &["stream", "validate"])?;
    demo.step("2. The PRD's stories", &["prd", "show"])?;
    demo.step("3. The next open story of the auth stream", &["prd", "next", "--stream", "auth"])?;
    demo.step("4. The dashboard", &["status"])?;
    demo.say(&format!("Done. Explore it yourself: cd {}", demo.dir.display()));
    Ok(())
}

struct Demo {
    dir: PathBuf,
    quiet: bool,
}

impl Demo {
    fn say(&self, text: &str) {
        if !self.quiet {
            println!("\n== {text}");
        }
    }

    /// The user's own git commands.
    fn git(&self, args: &[&str]) -> Result<()> {
        let mut cmd = crate::git::cli::git(&self.dir);
        cmd.args(args);
        // The sample commits need an identity even on a machine without one.
        for (k, v) in [("GIT_AUTHOR_NAME", "Demo User"), ("GIT_AUTHOR_EMAIL", "demo@example.com")] {
            cmd.env(k, v);
        }
        for (k, v) in [("GIT_COMMITTER_NAME", "Demo User"), ("GIT_COMMITTER_EMAIL", "demo@example.com")] {
            cmd.env(k, v);
        }
        crate::git::cli::run(cmd, &format!("run `git {}` for the demo", args.join(" ")))?;
        Ok(())
    }

    /// Run `git boulder ARGS` in the sample repository, showing the command and its output.
    fn step(&self, title: &str, args: &[&str]) -> Result<()> {
        self.say(title);
        if !self.quiet {
            println!("$ git boulder {}", args.join(" "));
        }
        let status = Command::new(self_exe()?).args(args).current_dir(&self.dir).status()?;
        if !status.success() {
            return Err(Error::internal(format!("demo step `git boulder {}` failed ({status})", args.join(" "))));
        }
        Ok(())
    }
}

fn self_exe() -> Result<PathBuf> {
    std::env::current_exe().map_err(|e| Error::internal(format!("cannot find the git-boulder binary: {e}")))
}
