//! `git boulder demo [DIR]`: the whole flow on an embedded sample project, narrated.
//!
//! The demo plays the user: it runs `git` and `git boulder` as a person would type them, in DIR
//! (a new temporary directory when none is given), and leaves DIR to explore.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use crate::context::Context;
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

pub fn run(args: DemoArgs, ctx: &Context) -> Result<()> {
    let quiet = ctx.quiet;
    let dir = match args.dir {
        Some(d) => {
            let hint = "give the demo an empty or new directory, or none for a temporary one";
            if d.exists() && !d.is_dir() {
                return Err(Error::usage(format!("{} is not a directory", d.display())).hint(hint));
            }
            if d.exists() && std::fs::read_dir(&d)?.next().is_some() {
                return Err(Error::usage(format!("{} is not empty", d.display())).hint(hint));
            }
            std::fs::create_dir_all(&d)
                .map_err(|e| Error::usage(format!("cannot create {}: {e}", d.display())).with_source(e).hint(hint))?;
            std::fs::canonicalize(&d)?
        }
        None => tempfile::Builder::new().prefix("git-boulder-demo-").tempdir()?.keep(),
    };
    let demo = Demo { dir: dir.join("notes"), quiet };
    std::fs::create_dir_all(&demo.dir)?;
    demo.say(&format!("Building a sample project in {}", demo.dir.display()))?;
    demo.line(&format!("$ cd {}    # every command below runs from here", shell_quote(&demo.dir.to_string_lossy())))?;
    for (path, text) in PROJECT {
        let p = demo.dir.join(path);
        std::fs::create_dir_all(p.parent().expect("embedded paths have a parent"))?;
        std::fs::write(&p, text)?;
    }
    demo.git(&["init", "-q", "-b", "main"])?;
    demo.git(&["add", "-A"])?;
    demo.git(&["commit", "-q", "-m", "Sample project with a PRD and a stream plan"])?;
    // The demo wrote this plan itself: whatever commands it names are trusted.
    let plan = PROJECT.iter().find(|(p, _)| *p == crate::plan::PLAN_PATH).map(|(_, t)| *t).unwrap_or_default();
    crate::trust::trust_written(&crate::git::Repo::open(&demo.dir)?, plan)?;

    let remote = dir.join("remote.git");
    demo.git(&["init", "-q", "--bare", "--initial-branch=main", remote.to_str().unwrap_or_default()])?;
    demo.git(&["remote", "add", "origin", remote.to_str().unwrap_or_default()])?;
    demo.git(&["push", "-q", "origin", "main"])?;

    demo.step("1. Check the stream plan against the PRD and the tree", &["stream", "validate"])?;
    demo.step("2. The PRD's stories", &["prd", "show"])?;
    demo.step("3. A branch and a linked worktree for every stream", &["stream", "init"])?;
    demo.step("4. Hooks that record every commit and guard ownership at push", &["hooks", "install"])?;
    demo.step("5. The next open story of the auth stream", &["prd", "next", "--stream", "auth"])?;

    demo.say("6. Two scripted agents commit in their streams at the same time")?;
    let auth = demo.dir.join(".boulder/worktrees/auth");
    let api = demo.dir.join(".boulder/worktrees/api");
    std::thread::scope(|s| -> Result<()> {
        let a = s.spawn(|| {
            demo.agent(&auth, &[("src/auth/hash.txt", "salted hashes\n", "auth: password hashing")])?;
            demo.agent(&auth, &[("src/auth/session.txt", "session tokens\n", "auth: session tokens")])
        });
        let b = s.spawn(|| demo.agent(&api, &[("src/api/notes.txt", "GET /notes\n", "api: list notes")]));
        a.join().map_err(|_| Error::internal("demo agent panicked"))??;
        b.join().map_err(|_| Error::internal("demo agent panicked"))??;
        Ok(())
    })?;
    demo.line("auth made 2 commits, api made 1; each commit got a note in refs/notes/boulder")?;
    demo.show_git(&auth, &["log", "--notes=boulder", "-1", "--format=%h %s%n  note: %N"])?;

    demo.say("7. The api agent strays into auth's files: the push is refused")?;
    demo.agent(&api, &[("src/auth/backdoor.txt", "not yours\n", "api: touch auth")])?;
    demo.show_git(&api, &["push", "origin", "boulder/api"])?;
    demo.step("", &["stream", "rollback", "api", "--to", "boulder/api~1"])?;
    demo.show_git(&api, &["push", "-q", "origin", "boulder/api"])?;
    demo.line(
        "after rolling the stray commit back (kept under a backup ref, set aside in its note so no landing \
         waits for it), the push goes through",
    )?;

    demo.step(
        "8. Stories done, recorded in git without editing the PRD",
        &["prd", "done", "US-AUTH-01", "US-AUTH-02"],
    )?;
    demo.say("9. Meanwhile someone commits on main (the base moves on)")?;
    std::fs::write(demo.dir.join("README.md"), "# Tiny notes service\n\nRun it with `notes serve`.\n")?;
    demo.git(&["commit", "-q", "-am", "README: how to run it"])?;
    demo.step(
        "10. What merging auth would do: commits, conflict check, PRD diff",
        &["stream", "merge", "auth", "--dry-run"],
    )?;
    demo.step("11. Merge auth: rebase onto main, fast-forward, sync the PRD", &["stream", "merge", "auth"])?;
    demo.show_git(&demo.dir, &["log", "--oneline", "-4"])?;

    demo.say("12. The docs agent rewrites README.md, which main changed too")?;
    let docs = demo.dir.join(".boulder/worktrees/docs");
    demo.agent(&docs, &[("docs/guide.md", "Install, run, first note.\n", "docs: getting started guide")])?;
    demo.agent(&docs, &[("README.md", "# Notes\n\nSee docs/guide.md.\n", "docs: point the README at the guide")])?;
    demo.step("", &["prd", "done", "US-DOCS-01"])?;
    demo.refused(
        "13. Merging docs is refused before anything changes: the conflict table",
        &["stream", "merge", "docs"],
    )?;
    demo.show_git(&docs, &["rebase", "-q", "-X", "theirs", "main"])?;
    demo.show_git(&docs, &["push", "-q", "origin", "boulder/docs"])?;
    demo.line("docs rebased onto main keeping its README, and its branch shared for whoever lands it")?;

    demo.step("14. Share the state: push it to the remote", &["push"])?;
    let mate = dir.join("teammate");
    demo.git(&["clone", "-q", remote.to_str().unwrap_or_default(), mate.to_str().unwrap_or_default()])?;
    demo.say(&format!("15. A teammate's clone ({}) pulls it", mate.display()))?;
    demo.step_in(&mate, &["pull"])?;
    demo.step_in(&mate, &["status"])?;
    demo.step("16. The dashboard", &["status"])?;
    demo.step("17. The op history of the auth stream", &["log", "auth"])?;

    demo.fleet(&dir, &remote)?;
    demo.say(&format!("Done. Explore it yourself: cd {}", shell_quote(&demo.dir.to_string_lossy())))?;
    Ok(())
}

struct Demo {
    dir: PathBuf,
    quiet: bool,
}

/// The agent the two simulated machines run: one story per iteration, a file in the stream's
/// paths, the story recorded done, one commit.
const FLEET_AGENT: &str = "#!/bin/sh\n# One story per run: a file in the stream's paths, the story done, a commit.\n\
set -e\ncase \"$BOULDER_STREAM\" in api) dir=src/api ;; *) dir=docs ;; esac\n\
echo \"$BOULDER_STORY_TITLE\" > \"$dir/$BOULDER_STORY.txt\"\n\
git add -A\ngit commit -q -m \"$BOULDER_STREAM: $BOULDER_STORY_TITLE\"\n\
git boulder prd done \"$BOULDER_STORY\"\n";

impl Demo {
    /// 18–20: two machines (clones of the remote) work the streams left, through the remote.
    fn fleet(&self, dir: &std::path::Path, remote: &std::path::Path) -> Result<()> {
        self.say("18. Share main (auth merged) and the state, then two machines clone the remote")?;
        self.show_git(&self.dir, &["push", "-q", "origin", "main"])?;
        self.step_in(&self.dir, &["push"])?;
        let agent = dir.join("agent.sh");
        std::fs::write(&agent, FLEET_AGENT)?;
        self.line(&format!("the scripted agent both machines run ({}):", agent.display()))?;
        for l in FLEET_AGENT.lines() {
            self.line(&format!("  {l}"))?;
        }
        let machines = [dir.join("machine-1"), dir.join("machine-2")];
        for (i, m) in machines.iter().enumerate() {
            self.git_in(dir, &["clone", "-q", remote.to_str().unwrap_or_default(), m.to_str().unwrap_or_default()])?;
            self.line(&self.typed(m, "config", &["boulder.actor", &format!("machine-{}", i + 1)]))?;
            self.git_in(m, &["config", "boulder.actor", &format!("machine-{}", i + 1)])?;
        }
        self.say(
            "19. Both machines run the worker at once: each claims a ready stream on the remote, runs it, lands it",
        )?;
        let agent_arg = agent.to_string_lossy().into_owned();
        let args = ["work", "--remote", "origin", "--parallel", "1", "--", "sh", agent_arg.as_str()];
        let outs = std::thread::scope(|s| {
            let runs: Vec<_> = machines.iter().map(|m| s.spawn(|| self.boulder_output(m, &args))).collect();
            runs.into_iter()
                .map(|r| r.join().map_err(|_| Error::internal("demo worker panicked"))?)
                .collect::<Result<Vec<_>>>()
        })?;
        for (m, out) in machines.iter().zip(&outs) {
            self.line(&self.typed(m, "boulder", &args))?;
            // What the worker did as it went (stderr), then its summary (stdout).
            self.relay(&std::process::Output {
                status: out.status,
                stdout: out.stderr.clone(),
                stderr: out.stdout.clone(),
            })?;
            if !out.status.success() {
                return Err(Error::internal(format!("demo step `git boulder {}` failed", args.join(" "))));
            }
        }
        self.line(
            "api went on from the boulder/api pushed in step 7; docs landed the two commits pushed in step 13: \
             a stream lands only with every commit recorded for it",
        )?;
        self.say("20. The remote's main: every stream landed once, in a straight line")?;
        self.git_in(&machines[0], &["fetch", "-q", "origin"])?;
        self.show_git(&machines[0], &["log", "--oneline", "-8", "origin/main"])?;
        self.step_in(&machines[0], &["sync"])?;
        self.step_in(&machines[0], &["status"])?;
        Ok(())
    }

    /// Run `git boulder ARGS` in `dir`, its output kept for later.
    fn boulder_output(&self, dir: &std::path::Path, args: &[&str]) -> Result<std::process::Output> {
        let mut run = Command::new(self_exe()?);
        run.args(args).current_dir(dir).stdin(std::process::Stdio::null());
        // What it runs (the agent's `git boulder …`, git's hooks) finds this binary.
        crate::git::cli::self_on_path(&mut run);
        crate::context::export(&mut run);
        identity(&mut run);
        Ok(run.output()?)
    }

    fn say(&self, text: &str) -> Result<()> {
        self.line(&format!("\n== {text}"))
    }

    /// A line of the narration on stdout (unless quiet). A closed pipe ends the demo quietly.
    fn line(&self, text: &str) -> Result<()> {
        if !self.quiet {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}")?;
            out.flush()?;
        }
        Ok(())
    }

    /// A child's output, stdout then stderr, on stdout, so every line reaches a pipe.
    fn relay(&self, out: &std::process::Output) -> Result<()> {
        if !self.quiet {
            let mut o = std::io::stdout().lock();
            o.write_all(&out.stdout)?;
            o.write_all(&out.stderr)?;
            o.flush()?;
        }
        Ok(())
    }

    /// How to type a command run in `dir` from the sample repository: `git -C REL …` elsewhere.
    fn typed(&self, dir: &std::path::Path, prog: &str, args: &[&str]) -> String {
        let mut words = vec!["git".to_string()];
        if dir != self.dir {
            let rel = relative(&self.dir, dir);
            words.push("-C".into());
            words.push(shell_quote(&rel));
        }
        if !prog.is_empty() {
            words.push(prog.into());
        }
        words.extend(args.iter().map(|a| shell_quote(a)));
        format!("$ {}", words.join(" "))
    }

    /// The user's own git commands.
    fn git(&self, args: &[&str]) -> Result<()> {
        self.git_in(&self.dir, args)
    }

    fn git_in(&self, dir: &std::path::Path, args: &[&str]) -> Result<()> {
        let mut cmd = self.user_git(dir);
        cmd.args(args);
        crate::git::cli::run(cmd, &format!("run `git {}` for the demo", args.join(" ")))?;
        Ok(())
    }

    /// A git command as the demo's user runs it: hooks on, an identity set.
    fn user_git(&self, dir: &std::path::Path) -> Command {
        let mut cmd = crate::git::cli::as_user(dir);
        identity(&mut cmd);
        cmd
    }

    /// A scripted agent: write each file and commit it, in its worktree.
    fn agent(&self, wt: &std::path::Path, work: &[(&str, &str, &str)]) -> Result<()> {
        for (path, text, msg) in work {
            let p = wt.join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, text)?;
            self.git_in(wt, &["add", "-A"])?;
            self.git_in(wt, &["commit", "-q", "-m", msg])?;
        }
        Ok(())
    }

    /// Run a git command whose output (and refusal) the user should see; its failure is shown,
    /// not fatal.
    fn show_git(&self, dir: &std::path::Path, args: &[&str]) -> Result<()> {
        self.line(&self.typed(dir, "", args))?;
        let out = self.user_git(dir).args(args).output()?;
        self.relay(&out)?;
        if !out.status.success() {
            self.line(&format!("(git exited with {})", out.status.code().unwrap_or(-1)))?;
        }
        Ok(())
    }

    /// Run `git boulder ARGS` in the sample repository, showing the command and its output.
    fn step(&self, title: &str, args: &[&str]) -> Result<()> {
        if !title.is_empty() {
            self.say(title)?;
        }
        self.step_in(&self.dir, args)
    }

    /// Run `git boulder ARGS` in `dir`, showing the command and its output; it must succeed.
    fn step_in(&self, dir: &std::path::Path, args: &[&str]) -> Result<()> {
        let code = self.show_boulder(dir, args)?;
        if code != 0 {
            return Err(Error::internal(format!("demo step `git boulder {}` failed (exit {code})", args.join(" "))));
        }
        Ok(())
    }

    /// A step that must be refused (exit 1), showing why.
    fn refused(&self, title: &str, args: &[&str]) -> Result<()> {
        self.say(title)?;
        let code = self.show_boulder(&self.dir, args)?;
        if code != 1 {
            return Err(Error::internal(format!(
                "demo step `git boulder {}` was not refused (exit {code})",
                args.join(" ")
            )));
        }
        self.line("(refused with exit 1; main, the stream branch and both worktrees are unchanged)")?;
        Ok(())
    }

    fn show_boulder(&self, dir: &std::path::Path, args: &[&str]) -> Result<i32> {
        self.line(&self.typed(dir, "boulder", args))?;
        let mut run = Command::new(self_exe()?);
        run.args(args).current_dir(dir).stdin(std::process::Stdio::null());
        // What it runs (the agent's `git boulder …`, git's hooks) finds this binary.
        crate::git::cli::self_on_path(&mut run);
        crate::context::export(&mut run);
        identity(&mut run);
        let out = run.output()?;
        self.relay(&out)?;
        Ok(out.status.code().unwrap_or(-1))
    }
}

/// The sample commits (and merges) need an identity even on a machine without one; the sample
/// repositories and clones are made in the formats git-boulder reads (SHA-1 ids, refs as files),
/// whatever the user's `init.defaultObjectFormat` or `init.defaultRefFormat` say (these variables
/// win over them; a git that predates them has no other format).
fn identity(cmd: &mut Command) {
    for (k, v) in [
        ("GIT_AUTHOR_NAME", "Demo User"),
        ("GIT_AUTHOR_EMAIL", "demo@example.com"),
        ("GIT_COMMITTER_NAME", "Demo User"),
        ("GIT_COMMITTER_EMAIL", "demo@example.com"),
        ("GIT_DEFAULT_HASH", "sha1"),
        ("GIT_DEFAULT_REF_FORMAT", "files"),
    ] {
        cmd.env(k, v);
    }
}

/// `s` as a POSIX shell word: as is when it is plainly safe, else in single quotes.
fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':' | '=' | '@' | '+' | ',' | '%')
        });
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `to` relative to `from` (both absolute, under a common folder): `../teammate`, `.boulder/x`.
fn relative(from: &std::path::Path, to: &std::path::Path) -> String {
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = std::iter::repeat_n("..".to_string(), a.len() - common).collect();
    parts.extend(b[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

fn self_exe() -> Result<PathBuf> {
    std::env::current_exe()
        .map_err(|e| Error::internal(format!("cannot find the git-boulder binary: {e}")).with_source(e))
}
