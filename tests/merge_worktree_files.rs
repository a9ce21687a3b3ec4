//! `stream merge` on real repositories: files reach the base worktree the way `git checkout`
//! writes them (git-lfs, `eol`, `ident`, a filter driver), sparse checkouts and submodules behave
//! as under `git merge --ff-only`, a commit landing while the merge runs is never reverted or
//! staged away, and the ownership check of pre-push runs on what the merge brings in.

use std::path::Path;

use crate::common::*;

const PRD: &str = "# PRD\n\n## Stories\n\n### [ ] US-001: Login\nIn src/auth.\n\n### [ ] US-002: List\nIn src/api.\n";

const PLAN: &str = "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  auth:\n    stories: [US-001]\n    paths: [src/auth/**]\n  api:\n    stories: [US-002]\n    paths: [src/api/**]\nsettings:\n  base_branch: main\n";

/// A tool a test needs: present, or the test is skipped — except under CI, where `.ci/run`
/// installs it and its absence is a failure.
fn have(tool: &str, args: &[&str]) -> bool {
    let ok = std::process::Command::new(tool).args(args).output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "{tool} is missing; .ci/run must install it");
        eprintln!("skipping: {tool} is not installed");
    }
    ok
}

fn setup_with(files: &[(&str, &str)], plan: &str) -> TestRepo {
    let mut all = vec![(".agents/tasks/prd.md", PRD), (".boulder/streams.yaml", plan)];
    all.extend_from_slice(files);
    let repo = TestRepo::with_files(&all);
    repo.boulder(&["stream", "init"]).ok();
    repo
}

fn status(repo: &TestRepo, dir: &Path) -> String {
    repo.git_in(dir, &["status", "--porcelain"]).ok().stdout
}

/// Stream auth with one commit (`src/auth/login.rs`) and its story done, the base moved on: a
/// merge that replays.
fn auth_done() -> TestRepo {
    let repo = setup_with(&[("src/auth/mod.rs", "// auth\n")], PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/login.rs", b"fn login() {}\n", "login");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    base_moves(&repo);
    repo
}

/// The base moves on, so the merge really replays and writes files into the base worktree.
fn base_moves(repo: &TestRepo) {
    repo.write("README.md", "moved on\n");
    repo.commit_all("main moves on");
}

/// Every file of `dir` (but .git and the worktrees folder), by relative path, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".git" || rel == ".boulder/worktrees" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                walk(root, &p, out);
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn merged_files_are_written_as_git_checkout_writes_them() {
    if !have("git-lfs", &["version"]) {
        return;
    }
    let repo = TestRepo::empty();
    repo.git(&["lfs", "install", "--local"]).ok();
    // A filter driver of the user's: rot13 in the worktree, plain in the repository.
    repo.git(&["config", "filter.rot.smudge", "tr A-Za-z N-ZA-Mn-za-m"]).ok();
    repo.git(&["config", "filter.rot.clean", "tr A-Za-z N-ZA-Mn-za-m"]).ok();
    repo.write(
        ".gitattributes",
        "*.bin filter=lfs diff=lfs merge=lfs -text\n*.txt text eol=crlf\n*.c ident\n*.rot filter=rot\n",
    );
    repo.write(".agents/tasks/prd.md", PRD);
    repo.write(".boulder/streams.yaml", PLAN);
    repo.commit_all("initial");
    repo.boulder(&["stream", "init", "auth"]).ok();
    let w = repo.worktree("auth");
    let blob: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::create_dir_all(w.join("src/auth")).unwrap();
    std::fs::write(w.join("src/auth/data.bin"), &blob).unwrap();
    std::fs::write(w.join("src/auth/notes.txt"), "one\ntwo\n").unwrap();
    std::fs::write(w.join("src/auth/x.c"), "/* $Id$ */\n").unwrap();
    std::fs::write(w.join("src/auth/secret.rot"), "Hello\n").unwrap();
    repo.git_in(&w, &["add", "-A"]).ok();
    repo.git_in(&w, &["commit", "-q", "-m", "auth work"]).ok();
    // What the repository holds is the clean form: an LFS pointer, LF endings, rot13 text.
    assert!(repo.git_out(&["cat-file", "-p", "boulder/auth:src/auth/data.bin"]).starts_with("version https://git-lfs"));
    assert_eq!(repo.git_out(&["cat-file", "-p", "boulder/auth:src/auth/secret.rot"]), "Uryyb");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    base_moves(&repo);

    repo.boulder(&["stream", "merge", "auth"]).ok();

    // The base worktree holds what a checkout holds: the real content, CRLF, the expanded ident,
    // the smudged text.
    assert_eq!(std::fs::read(repo.dir.join("src/auth/data.bin")).unwrap(), blob);
    assert_eq!(repo.read("src/auth/notes.txt"), "one\r\ntwo\r\n");
    assert!(repo.read("src/auth/x.c").starts_with("/* $Id: "), "{}", repo.read("src/auth/x.c"));
    assert_eq!(repo.read("src/auth/secret.rot"), "Hello\n");
    assert_eq!(status(&repo, &repo.dir), "");
    assert_eq!(status(&repo, &w), "");
    // Byte for byte what `git worktree add` of the same commit writes.
    let check = repo.tmp.path().join("check");
    repo.git(&["worktree", "add", "-q", "--detach", check.to_str().unwrap(), "main"]).ok();
    let mut ours = files(&repo.dir);
    ours.retain(|(p, _)| !p.starts_with(".boulder/worktrees"));
    assert_eq!(ours, files(&check));
    repo.assert_fsck();
}

/// A repository `sub` (one commit, `lib.txt`) added and committed as a submodule at `at`.
fn add_submodule(repo: &TestRepo, at: &str) -> std::path::PathBuf {
    let sub = repo.tmp.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    repo.git_in(&sub, &["init", "-q", "-b", "main"]).ok();
    std::fs::write(sub.join("lib.txt"), "v1\n").unwrap();
    repo.git_in(&sub, &["add", "-A"]).ok();
    repo.git_in(&sub, &["commit", "-q", "-m", "v1"]).ok();
    repo.git(&["-c", "protocol.file.allow=always", "submodule", "add", "-q", sub.to_str().unwrap(), at]).ok();
    repo.git(&["commit", "-q", "-m", "add submodule"]).ok();
    sub
}

#[test]
fn a_sparse_checkout_and_submodules_behave_as_under_merge_ff_only() {
    let repo = setup_with(
        &[("src/auth/mod.rs", "// auth\n"), ("src/api/mod.rs", "// api\n"), ("docs/index.md", "# docs\n")],
        PLAN,
    );
    // A submodule, tracked by the base.
    let sub = add_submodule(&repo, "vendor/sub");
    // The main worktree is sparse: src/ is not checked out. (The plan's folder, where the stream
    // worktrees live, and the PRD's stay in the cone: git deletes folders outside the cone that
    // hold only ignored files, and the stream worktrees are such files to it.)
    repo.git(&["sparse-checkout", "set", "--cone", "docs", "vendor", ".boulder", ".agents"]).ok();
    assert!(!repo.dir.join("src/auth/mod.rs").exists());

    // auth: new work under src/ (outside the cone) on an old base; also moves the submodule.
    let w = repo.worktree("auth");
    repo.git_in(&w, &["merge", "-q", "--ff-only", "main"]).ok();
    repo.git_in(&w, &["-c", "protocol.file.allow=always", "submodule", "update", "--init", "-q"]).ok();
    std::fs::write(sub.join("lib.txt"), "v2\n").unwrap();
    repo.git_in(&sub, &["commit", "-qam", "v2"]).ok();
    let sw = w.join("vendor/sub");
    repo.git_in(&sw, &["-c", "protocol.file.allow=always", "fetch", "-q", "origin"]).ok();
    repo.git_in(&sw, &["checkout", "-q", "origin/main"]).ok();
    repo.git_in(&w, &["add", "vendor/sub"]).ok();
    repo.git_in(&w, &["commit", "-q", "-m", "bump the submodule"]).ok();
    commit_in(&repo, &w, "src/auth/login.rs", b"fn login() {}\n", "login");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    // The base moves in the cone meanwhile: a gitlink changed on one side only is no conflict.
    repo.write("docs/more.md", "more\n");
    repo.commit_all("docs move on");

    let r = repo.boulder(&["stream", "merge", "auth"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let gitlink = repo.git_out(&["rev-parse", "main:vendor/sub"]);
    assert_eq!(gitlink, repo.git_in(&sub, &["rev-parse", "HEAD"]).ok().stdout.trim());
    // Outside the cone nothing was written, and git agrees that nothing is changed.
    assert!(!repo.dir.join("src/auth/login.rs").exists());
    assert_eq!(repo.git_out(&["ls-files", "-t", "src/auth/login.rs"]), "S src/auth/login.rs");
    // Submodules are not entered (no --recurse-submodules): the gitlink moved, its checkout did
    // not, exactly what `git merge --ff-only` leaves.
    assert_eq!(status(&repo, &repo.dir), " M vendor/sub\n");

    // The main worktree's submodule is now merely behind its gitlink; a later merge that does not
    // touch it is not blocked by it.
    repo.git(&["-c", "protocol.file.allow=always", "submodule", "update", "--init", "-q"]).ok();
    repo.git_in(&repo.dir.join("vendor/sub"), &["checkout", "-q", "HEAD~1"]).ok();
    assert!(status(&repo, &repo.dir).contains("vendor/sub"));
    let a = repo.worktree("api");
    commit_in(&repo, &a, "src/api/list.rs", b"fn list() {}\n", "list");
    repo.boulder(&["prd", "done", "US-002"]).ok();
    let r = repo.boulder(&["stream", "merge", "api"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(repo.git_out(&["ls-files", "-t", "src/api/list.rs"]), "S src/api/list.rs");
    repo.assert_fsck();
}

#[test]
fn a_commit_landing_between_plan_and_change_stops_the_merge_and_keeps_it() {
    let repo = setup_with(&[("src/auth/mod.rs", "// auth\n"), ("src/api/mod.rs", "// api\n")], PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/login.rs", b"fn login() {}\n", "login");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    base_moves(&repo);
    let main_before = rev(&repo, "main");

    // Between planning and the first ref move, someone commits in the stream's worktree.
    let late = format!(
        "cd '{}' && echo 'fn late() {{}}' > src/auth/late.rs && git add -A && git commit -q -m late",
        w.display()
    );
    let r = repo.boulder_env(
        &repo.dir,
        &["stream", "merge", "auth"],
        &[("BOULDER_FAILPOINT_RUN", "merge-journal"), ("BOULDER_FAILPOINT_CMD", &late)],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("a_commit_landing_between_plan_and_change_stops_the_merge_and_keeps_it", r);
    // Nothing reverted, nothing staged: the late commit is the stream's tip, its worktree is
    // clean and holds it; the base did not move.
    assert_eq!(repo.git_in(&w, &["log", "-1", "--format=%s"]).ok().stdout.trim(), "late");
    assert_eq!(status(&repo, &w), "");
    assert!(w.join("src/auth/late.rs").exists() && w.join("src/auth/login.rs").exists());
    assert_eq!(rev(&repo, "main"), main_before);
    assert_eq!(status(&repo, &repo.dir), "");
    assert!(!repo.dir.join(".git/boulder/merge/auth.json").exists());
    assert!(!repo.dir.join(".git/worktrees/auth/index.lock").exists());

    // A rerun plans again from the new state and brings the late commit too.
    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_eq!(repo.read("src/auth/late.rs"), "fn late() {}\n");
    assert_eq!(rev(&repo, "boulder/auth"), rev(&repo, "main~1"));
    assert_eq!(status(&repo, &w), "");
    assert_eq!(status(&repo, &repo.dir), "");
    repo.assert_fsck();
}

#[test]
fn a_commit_on_the_base_between_plan_and_change_stops_before_the_base_moves() {
    let repo = auth_done();
    let late = format!(
        "cd '{}' && echo late > late.txt && git add late.txt && git commit -q -m 'late on main'",
        repo.dir.display()
    );
    let r = repo.boulder_env(
        &repo.dir,
        &["stream", "merge", "auth"],
        &[("BOULDER_FAILPOINT_RUN", "merge-verify"), ("BOULDER_FAILPOINT_CMD", &late)],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("a_commit_on_the_base_between_plan_and_change_stops_before_the_base_moves", r);
    assert_eq!(repo.git_out(&["log", "-1", "--format=%s", "main"]), "late on main");
    assert_eq!(status(&repo, &repo.dir), "");
    // The rerun replays onto the new base.
    repo.boulder(&["stream", "merge", "auth"]).ok();
    repo.git(&["merge-base", "--is-ancestor", "HEAD", "main"]).ok();
    assert!(repo.dir.join("late.txt").exists() && repo.dir.join("src/auth/login.rs").exists());
    assert_eq!(status(&repo, &repo.dir), "");
    repo.assert_fsck();
}

#[test]
fn commits_racing_a_merge_are_never_reverted_or_lost() {
    for round in 0..3 {
        let repo = setup_with(&[("src/auth/mod.rs", "// auth\n")], PLAN);
        let w = repo.worktree("auth");
        commit_in(&repo, &w, "src/auth/login.rs", b"fn login() {}\n", "login");
        repo.boulder(&["prd", "done", "US-001"]).ok();
        base_moves(&repo);
        // A committer in the stream's worktree, racing the merge; a commit git refuses (the
        // merge holds the index) is simply tried again.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let committed = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let (w2, home, clock, stop2, committed2) =
            (w.clone(), repo.home.clone(), repo.clock.clone(), stop.clone(), committed.clone());
        let racer = std::thread::spawn(move || {
            let git = |args: &[&str]| {
                let mut c = std::process::Command::new("git");
                fixed_env_at(&mut c, &home, &clock);
                c.args(args).current_dir(&w2).output().unwrap().status.success()
            };
            let mut i = 0;
            while !stop2.load(std::sync::atomic::Ordering::SeqCst) && i < 40 {
                // One unit of work, finished even when the merge holds the index a moment.
                let name = format!("src/auth/r{round}_{i}.rs");
                std::fs::write(w2.join(&name), format!("// {i}\n")).unwrap();
                let retry = |args: &[&str]| {
                    let ok = (0..500)
                        .any(|_| git(args) || (std::thread::sleep(std::time::Duration::from_millis(5)), false).1);
                    assert!(ok, "git {args:?} kept failing");
                };
                retry(&["add", &name]);
                retry(&["commit", "-q", "-m", &name]);
                committed2.lock().unwrap().push(name);
                i += 1;
            }
        });
        // Each round lets the committer get further ahead before the merge starts.
        wait_for("the committer's first commits", || committed.lock().unwrap().len() >= round);
        let mut merged = false;
        for _ in 0..5 {
            let r = repo.boulder(&["stream", "merge", "auth"]);
            if r.code == 0 {
                merged = true;
                break;
            }
            assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        racer.join().unwrap();
        // Whatever happened: the stream's worktree holds its branch tip with nothing staged and
        // nothing reverted, every racing commit is on the stream branch, and the base, if it
        // moved, moved to a state that holds the stream's first work.
        assert_eq!(status(&repo, &w), "", "round {round}");
        for name in committed.lock().unwrap().iter() {
            assert!(w.join(name).exists(), "round {round}: {name}");
            let inside = repo.git(&["cat-file", "-e", &format!("boulder/auth:{name}")]);
            assert_eq!(inside.code, 0, "round {round}: {name} is not on the stream branch");
        }
        if merged {
            assert!(repo.dir.join("src/auth/login.rs").exists());
        }
        assert_eq!(status(&repo, &repo.dir), "", "round {round}");
        repo.assert_fsck();
    }
}

#[test]
fn merge_runs_the_ownership_check_of_pre_push() {
    let repo = setup_with(&[("src/auth/mod.rs", "// auth\n"), ("src/api/mod.rs", "// api\n")], PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/login.rs", b"fn login() {}\n", "login");
    commit_in(&repo, &w, "src/api/mod.rs", b"// auth was here\n", "touch api");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    let before = rev(&repo, "main");

    // The dry run refuses as the real run does (exit 1), naming the violation.
    let d = repo.boulder(&["stream", "merge", "auth", "--dry-run"]).code(1);
    assert_shown!("ownership_refused_dry_run", d);
    // settings.ownership: error (the default) refuses, changing nothing.
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert_shown!("ownership_refused", r);
    assert_eq!(rev(&repo, "main"), before);
    assert!(!repo.dir.join(".git/boulder/merge/auth.json").exists());
    // warn: merged, with the violation said on stderr.
    let plan = PLAN.replace("  base_branch: main\n", "  base_branch: main\n  ownership: warn\n");
    repo.write(".boulder/streams.yaml", &plan);
    repo.commit_all("ownership: warn");
    let r = repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_shown!("ownership_warned", r);
    assert_eq!(repo.read("src/api/mod.rs"), "// auth was here\n");
}

#[test]
fn force_merges_past_an_ownership_violation() {
    let repo = setup_with(&[("src/auth/mod.rs", "// auth\n"), ("src/api/mod.rs", "// api\n")], PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/api/mod.rs", b"// auth was here\n", "touch api");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    let r = repo.boulder(&["stream", "merge", "auth", "--force"]).ok();
    assert_shown!("force_merges_past_an_ownership_violation", r);
    assert_eq!(repo.read("src/api/mod.rs"), "// auth was here\n");
}

#[test]
fn a_file_replacing_a_checked_out_submodule_is_refused_and_the_submodule_kept() {
    let repo = setup_with(&[("src/auth/mod.rs", "// auth\n")], PLAN);
    add_submodule(&repo, "src/auth/vendor");
    // The stream turns the submodule into a plain file.
    let w = repo.worktree("auth");
    repo.git_in(&w, &["merge", "-q", "--ff-only", "main"]).ok();
    repo.git_in(&w, &["rm", "-q", "--cached", "src/auth/vendor"]).ok();
    let _ = std::fs::remove_dir_all(w.join("src/auth/vendor"));
    commit_in(&repo, &w, "src/auth/vendor", b"now a file\n", "vendor becomes a file");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    base_moves(&repo);
    let before = rev(&repo, "main");
    let r = repo.boulder(&["stream", "merge", "auth", "--force"]).code(1);
    assert_shown!("a_file_replacing_a_checked_out_submodule_is_refused_and_the_submodule_kept", r);
    assert_eq!(rev(&repo, "main"), before);
    assert_eq!(std::fs::read_to_string(repo.dir.join("src/auth/vendor/lib.txt")).unwrap(), "v1\n");
}

#[test]
fn a_branch_being_rebased_or_bisected_is_not_moved_as_git_refuses_to() {
    let repo = setup_with(&[("src/auth/mod.rs", "// auth\n")], PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/login.rs", b"fn login() {}\n", "login");
    commit_in(&repo, &w, "src/auth/logout.rs", b"fn logout() {}\n", "logout");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    base_moves(&repo);
    base_moves_again(&repo);
    let (main_before, auth_before) = (rev(&repo, "main"), rev(&repo, "boulder/auth"));
    let refused = |what: &str, hint: &str| {
        let r = repo.boulder(&["stream", "merge", "auth"]);
        assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(what) && r.stderr.contains(hint), "{}", r.stderr);
        assert_eq!((rev(&repo, "main"), rev(&repo, "boulder/auth")), (main_before.clone(), auth_before.clone()));
    };

    // The base, stopped in an interactive rebase in the main worktree: git's `branch -f` refuses.
    let rebase = |dir: &Path| {
        let mut git = repo.command("git");
        git.args(["rebase", "-q", "-i", "HEAD~2"]).current_dir(dir).env("GIT_SEQUENCE_EDITOR", "sed -i 1s/^pick/edit/");
        Run::from(git.output().unwrap()).ok();
    };
    rebase(&repo.dir);
    assert_ne!(repo.git(&["branch", "-f", "main", "boulder/auth"]).code, 0);
    refused("branch main is being rebased in the worktree", "git rebase --abort");
    repo.git(&["rebase", "--abort"]).ok();

    // The stream's branch, in its own worktree.
    rebase(&w);
    refused("branch boulder/auth is being rebased", "git rebase --continue");
    repo.git_in(&w, &["rebase", "--abort"]).ok();

    // A bisection started from the base.
    repo.git(&["bisect", "start", "HEAD", "HEAD~2"]).ok();
    refused("branch main is being bisected", "git bisect reset");
    repo.git(&["bisect", "reset"]).ok();

    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert_eq!(repo.read("src/auth/logout.rs"), "fn logout() {}\n");
    repo.assert_fsck();
}

fn base_moves_again(repo: &TestRepo) {
    repo.write("NOTES.md", "moved on again\n");
    repo.commit_all("main moves on again");
}

#[test]
fn the_base_worktree_runs_its_post_merge_hook_as_under_git_merge() {
    let repo = auth_done();
    // The user's hook, where git looks for it (a hook manager's core.hooksPath here).
    let hooks = repo.dir.join(".husky");
    std::fs::create_dir_all(&hooks).unwrap();
    let seen = repo.tmp.path().join("post-merge.txt");
    let hook = hooks.join("post-merge");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\necho \"$1 $(pwd) $(cat src/auth/login.rs)\" >> '{}'\nexit 3\n", seen.display()),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    repo.git(&["config", "core.hooksPath", ".husky"]).ok();
    repo.boulder(&["stream", "merge", "auth"]).ok();
    let root = std::fs::canonicalize(&repo.dir).unwrap();
    // Once, with git's argument (not a squash), in the base's worktree, after its files moved;
    // its failure changes nothing, as under git.
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), format!("0 {} fn login() {{}}\n", root.display()));
    assert_eq!(status(&repo, &repo.dir), "?? .husky/\n");
    // A dry run and a merge with nothing to bring run nothing.
    repo.boulder(&["stream", "merge", "auth", "--dry-run"]).ok();
    assert_eq!(std::fs::read_to_string(&seen).unwrap().lines().count(), 1);
}

#[test]
fn a_skip_worktree_file_with_local_changes_is_not_hidden_behind_the_merge() {
    let repo = setup_with(&[("src/auth/mod.rs", "// auth\n")], PLAN);
    let w = repo.worktree("auth");
    commit_in(&repo, &w, "src/auth/mod.rs", b"// auth, changed by the stream\n", "auth");
    repo.boulder(&["prd", "done", "US-001"]).ok();
    base_moves(&repo);
    // The user marked it skip-worktree and edited it: `git merge --ff-only` would refuse.
    repo.git(&["update-index", "--skip-worktree", "src/auth/mod.rs"]).ok();
    repo.write("src/auth/mod.rs", "// my local version\n");
    let main_before = rev(&repo, "main");
    let r = repo.boulder(&["stream", "merge", "auth"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_shown!("a_skip_worktree_file_with_local_changes_is_not_hidden_behind_the_merge", r);
    assert_eq!(rev(&repo, "main"), main_before);
    assert_eq!(repo.read("src/auth/mod.rs"), "// my local version\n");
    // Back to what the index holds: the merge goes ahead, the entry stays skip-worktree.
    repo.write("src/auth/mod.rs", "// auth\n");
    repo.boulder(&["stream", "merge", "auth"]).ok();
    assert!(repo.git_out(&["ls-files", "-v", "src/auth/mod.rs"]).starts_with("S "));
    repo.assert_fsck();
}

#[test]
fn a_stream_worktree_made_from_a_sparse_checkout_holds_the_streams_own_paths() {
    let plan = "version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  auth:\n    stories: [US-001]\n    paths: [src/auth/**]\n  api:\n    stories: [US-002]\n    paths: ['**/*.rs']\nsettings:\n  base_branch: main\n  shared_read: [proto/*.proto]\n";
    for cone in [true, false] {
        let repo = TestRepo::with_files(&[
            (".agents/tasks/prd.md", PRD),
            (".boulder/streams.yaml", plan),
            ("src/auth/mod.rs", "// auth\n"),
            ("src/api/mod.rs", "// api\n"),
            ("proto/a.proto", "syntax\n"),
            ("docs/index.md", "# docs\n"),
        ]);
        // The main worktree holds only docs/ (and the plan's and PRD's folders).
        if cone {
            repo.git(&["sparse-checkout", "set", "--cone", "docs", ".boulder", ".agents"]).ok();
        } else {
            repo.git(&["sparse-checkout", "set", "--no-cone", "/docs/", "/.boulder/", "/.agents/"]).ok();
        }
        assert!(!repo.dir.join("src/auth/mod.rs").exists());
        let r = repo.boulder(&["stream", "init"]);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        let w = repo.worktree("auth");
        // The stream sees what it owns and what it may read; the rest stays out, as in the
        // worktree it was made from.
        assert_eq!(std::fs::read_to_string(w.join("src/auth/mod.rs")).unwrap(), "// auth\n", "cone {cone}");
        assert!(w.join("proto/a.proto").exists(), "cone {cone}");
        assert!(w.join(".boulder/streams.yaml").exists() && w.join("docs/index.md").exists());
        assert!(!w.join("src/api/mod.rs").exists(), "cone {cone}");
        assert_eq!(status(&repo, &w), "");
        // A stream whose paths reach every folder gets the whole tree.
        let a = repo.worktree("api");
        assert!(a.join("src/api/mod.rs").exists() && a.join("src/auth/mod.rs").exists(), "cone {cone}");
        assert_eq!(status(&repo, &a), "");
        // The main worktree is as it was.
        assert!(!repo.dir.join("src/auth/mod.rs").exists());
        assert_eq!(status(&repo, &repo.dir), "");
        // A second init changes nothing.
        let r = repo.boulder(&["stream", "init"]);
        assert!(!r.stdout.contains("sparse"), "{}", r.stdout);
        repo.assert_fsck();
    }
}

/// Stream auth (owning all of src/) changes `src/auth/...` by `change` in its worktree, story done,
/// the base moved on.
fn reshaped(change: impl FnOnce(&Path)) -> TestRepo {
    let plan =
        PLAN.replace("paths: [src/auth/**]", "paths: [src/**]").replace("paths: [src/api/**]", "paths: [lib/**]");
    let repo = setup_with(&[("src/auth/d/f", "f\n"), ("src/auth/x", "x\n")], &plan);
    let w = repo.worktree("auth");
    change(&w);
    repo.git_in(&w, &["add", "-A"]).ok();
    repo.git_in(&w, &["commit", "-q", "-m", "reshape"]).ok();
    repo.boulder(&["prd", "done", "US-001"]).ok();
    base_moves(&repo);
    repo
}

#[test]
fn a_folder_becoming_a_file_or_a_file_a_folder_merges_as_under_git() {
    type Change = fn(&Path);
    let cases: [(&str, Change); 3] = [
        ("dir to file", |w| {
            std::fs::remove_dir_all(w.join("src/auth/d")).unwrap();
            std::fs::write(w.join("src/auth/d"), "now a file\n").unwrap();
        }),
        ("file to dir", |w| {
            std::fs::remove_file(w.join("src/auth/x")).unwrap();
            std::fs::create_dir(w.join("src/auth/x")).unwrap();
            std::fs::write(w.join("src/auth/x/y"), "y\n").unwrap();
        }),
        ("dir to symlink", |w| {
            std::fs::remove_dir_all(w.join("src/auth/d")).unwrap();
            std::os::unix::fs::symlink("x", w.join("src/auth/d")).unwrap();
        }),
    ];
    for (what, change) in cases {
        let repo = reshaped(change);
        let r = repo.boulder(&["stream", "merge", "auth"]);
        assert_eq!(r.code, 0, "{what}: {}\n{}", r.stdout, r.stderr);
        assert_eq!(status(&repo, &repo.dir), "", "{what}");
        // The worktree holds what main's tree says, as a checkout would write it.
        let fresh = repo.tmp.path().join(format!("fresh-{}", what.replace(' ', "-")));
        repo.git(&["worktree", "add", "-q", "--detach", fresh.to_str().unwrap(), "main"]).ok();
        assert_eq!(files(&repo.dir.join("src")), files(&fresh.join("src")), "{what}");
        repo.assert_fsck();
    }
}

#[test]
fn what_stands_where_a_folder_or_file_is_to_go_is_kept_unless_the_merge_removes_it() {
    // The user's untracked symlink where the stream brings a folder: refused, as git refuses.
    let repo = reshaped(|w| {
        std::fs::write(w.join("src/auth/new/file"), "n\n").unwrap_or_else(|_| {
            std::fs::create_dir_all(w.join("src/auth/new")).unwrap();
            std::fs::write(w.join("src/auth/new/file"), "n\n").unwrap();
        })
    });
    let outside = repo.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, repo.dir.join("src/auth/new")).unwrap();
    let main_before = rev(&repo, "main");
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert_shown!("untracked_file_where_a_file_goes", r);
    assert!(std::fs::symlink_metadata(repo.dir.join("src/auth/new")).unwrap().file_type().is_symlink());
    assert_eq!(rev(&repo, "main"), main_before);
    assert!(!outside.join("file").exists());

    // An untracked file in a folder the stream turns into a file: refused, the file kept.
    let repo = reshaped(|w| {
        std::fs::remove_dir_all(w.join("src/auth/d")).unwrap();
        std::fs::write(w.join("src/auth/d"), "now a file\n").unwrap();
    });
    std::fs::write(repo.dir.join("src/auth/d/notes.txt"), "mine\n").unwrap();
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert_shown!("untracked_file_where_a_folder_goes", r);
    assert_eq!(std::fs::read_to_string(repo.dir.join("src/auth/d/notes.txt")).unwrap(), "mine\n");
    assert_eq!(std::fs::read_to_string(repo.dir.join("src/auth/d/f")).unwrap(), "f\n");
}

/// `n` files `src/auth/f<i>.txt` ("v1 <i>") written through a filter that shouts them (the files
/// differ from their blobs), committed, and the streams initialized.
fn filtered_streams(n: usize) -> TestRepo {
    let repo = TestRepo::with_files(&[(".agents/tasks/prd.md", PRD), (".boulder/streams.yaml", PLAN)]);
    repo.git(&["config", "filter.shout.smudge", "tr a-z A-Z"]).ok();
    repo.git(&["config", "filter.shout.clean", "tr A-Z a-z"]).ok();
    repo.write(".gitattributes", "*.txt filter=shout\n");
    for i in 0..n {
        repo.write(&format!("src/auth/f{i}.txt"), &format!("v1 {i}\n"));
    }
    repo.commit_all("files");
    repo.git(&["reset", "-q", "--hard"]).ok();
    repo.boulder(&["stream", "init"]).ok();
    repo
}

/// A merge that writes many files through a filter (the files differ from their blobs), killed
/// at each point of writing the base worktree, is finished by a rerun, the worktree as a fresh
/// checkout writes it; a file changed after the kill stops the rerun, which keeps the interrupted
/// merge to finish once it is dealt with.
#[test]
fn a_merge_killed_while_it_writes_the_worktree_is_finished_by_a_rerun() {
    let setup = |base_moves_on: bool| {
        let repo = filtered_streams(20);
        let w = repo.worktree("auth");
        for i in 0..20 {
            std::fs::write(w.join(format!("src/auth/f{i}.txt")), format!("v2 {i}\n")).unwrap();
        }
        std::fs::remove_file(w.join("src/auth/f19.txt")).unwrap();
        repo.git_in(&w, &["add", "-A"]).ok();
        repo.git_in(&w, &["commit", "-q", "-m", "v2"]).ok();
        repo.boulder(&["prd", "done", "US-001"]).ok();
        if base_moves_on {
            base_moves(&repo);
        }
        repo
    };
    for (step, moves) in [
        ("checkout-recorded", true),
        ("checkout-first-file", true),
        ("checkout-first-file", false),
        ("index-lock-noted", false),
        ("index-lock-linked", false),
        ("index-lock-written", false),
        ("index-in-place", false),
        ("checkout-index-in-place", false),
    ] {
        let repo = setup(moves);
        let r = repo.boulder_env(&repo.dir, &["stream", "merge", "auth"], &[("BOULDER_FAILPOINT", step)]);
        assert!(r.stderr.contains(&format!("failpoint {step}")), "{step}: {}", r.stderr);
        let r = repo.boulder(&["stream", "merge", "auth"]);
        assert_eq!(r.code, 0, "{step}: {}\n{}", r.stdout, r.stderr);
        assert_eq!(status(&repo, &repo.dir), "", "{step}");
        assert_eq!(repo.read("src/auth/f3.txt"), "V2 3\n", "{step}: written through the filter");
        assert!(!repo.dir.join("src/auth/f19.txt").exists(), "{step}");
        let fresh = repo.tmp.path().join("fresh");
        repo.git(&["worktree", "add", "-q", "--detach", fresh.to_str().unwrap(), "main"]).ok();
        assert_eq!(files(&repo.dir.join("src")), files(&fresh.join("src")), "{step}");
        for leftover in [
            "boulder-checkout.record",
            "boulder-checkout.stage",
            "index.boulder-checkout",
            "index.boulder-new",
            "index.lock",
        ] {
            assert!(!repo.dir.join(".git").join(leftover).exists(), "{step}: {leftover}");
        }
        let takers = std::fs::read_dir(repo.dir.join(".git")).unwrap().flatten();
        let takers: Vec<_> = takers.filter(|e| e.file_name().to_string_lossy().starts_with("index.lock.")).collect();
        assert!(takers.is_empty(), "{step}: {takers:?}");
        repo.assert_fsck();
    }

    // Killed after the first file was put in place in the base worktree (the stream's needs no
    // update: the base did not move); the user then edits it.
    let repo = setup(false);
    let r = repo.boulder_env(&repo.dir, &["stream", "merge", "auth"], &[("BOULDER_FAILPOINT", "checkout-first-file")]);
    assert_shown!("merge_killed_writing_the_worktree", r);
    let first = (0..19).map(|i| format!("src/auth/f{i}.txt")).find(|p| repo.read(p).starts_with("V2")).unwrap();
    repo.write(&first, "mine\n");
    let r = repo.boulder(&["stream", "merge", "auth"]).code(1);
    assert!(r.stderr.contains("interrupted") && r.stderr.contains(&first), "{}", r.stderr);
    assert_eq!(repo.read(&first), "mine\n");
    assert!(repo.dir.join(".git/boulder/merge/auth.json").exists(), "the interrupted merge is kept");
    // Dealt with, the rerun finishes.
    std::fs::remove_file(repo.dir.join(&first)).unwrap();
    repo.git(&["checkout", "--", &first]).ok();
    let r = repo.boulder(&["stream", "merge", "auth"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(status(&repo, &repo.dir), "");
    assert_eq!(repo.stream_state("auth")["status"], "MERGED");
}

/// The base branch checked out on another file system than the git dir (files are copied, not
/// renamed, into place): a merge killed while it writes that worktree is finished by a rerun,
/// which knows the copies as its own, and leaves no partial copy behind.
#[test]
fn a_merge_into_a_worktree_on_another_file_system_killed_half_way_is_finished_by_a_rerun() {
    use std::os::unix::fs::MetadataExt;
    let shm = Path::new("/dev/shm");
    let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    let probe = tempfile::tempdir().unwrap();
    if dev(shm).is_none() || dev(shm) == dev(probe.path()) {
        // Nothing to install makes one: a machine without it cannot run this case, but CI's can.
        assert!(std::env::var_os("CI").is_none(), "/dev/shm must be a separate file system (a tmpfs) under CI");
        eprintln!("skipped: /dev/shm is not a separate file system here");
        return;
    }
    for step in ["checkout-first-file", "checkout-copied", "index-lock-written"] {
        let repo = filtered_streams(10);
        let w = repo.worktree("auth");
        for i in 0..10 {
            std::fs::write(w.join(format!("src/auth/f{i}.txt")), format!("v2 {i}\n")).unwrap();
        }
        repo.git_in(&w, &["commit", "-q", "-am", "v2"]).ok();
        repo.boulder(&["prd", "done", "US-001"]).ok();
        // The base branch moves to a worktree in /dev/shm.
        let away = tempfile::tempdir_in(shm).unwrap();
        let base = away.path().join("base");
        repo.git(&["switch", "-q", "-c", "parking"]).ok();
        repo.git(&["worktree", "add", "-q", base.to_str().unwrap(), "main"]).ok();

        let r = repo.boulder_env(&repo.dir, &["stream", "merge", "auth"], &[("BOULDER_FAILPOINT", step)]);
        assert!(r.stderr.contains(&format!("failpoint {step}")), "{step}: {}", r.stderr);
        let r = repo.boulder(&["stream", "merge", "auth"]);
        assert_eq!(r.code, 0, "{step}: {}\n{}", r.stdout, r.stderr);
        assert_eq!(status(&repo, &base), "", "{step}");
        assert_eq!(std::fs::read_to_string(base.join("src/auth/f3.txt")).unwrap(), "V2 3\n", "{step}");
        let left: Vec<String> = std::fs::read_dir(base.join("src/auth"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{step}: left beside the files: {left:?}");
        let gitdir = repo.dir.join(".git/worktrees/base");
        for leftover in ["boulder-checkout.record", "boulder-checkout.stage", "index.boulder-new", "index.lock"] {
            assert!(!gitdir.join(leftover).exists(), "{step}: {leftover}");
        }
        assert_eq!(repo.stream_state("auth")["status"], "MERGED", "{step}");
        repo.git(&["worktree", "remove", "--force", base.to_str().unwrap()]).ok();
        repo.assert_fsck();
    }
}

/// A file the stream replaces with a submodule: the file goes and the submodule's (empty) folder
/// comes, as `git merge --ff-only` leaves it.
#[test]
fn a_file_becoming_a_submodule_leaves_its_folder_as_git_does() {
    let repo = setup_with(&[("src/auth/mod.rs", "// auth\n"), ("src/auth/vendor", "a file\n")], PLAN);
    let sub = repo.tmp.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    repo.git_in(&sub, &["init", "-q", "-b", "main"]).ok();
    std::fs::write(sub.join("lib.txt"), "v1\n").unwrap();
    repo.git_in(&sub, &["add", "-A"]).ok();
    repo.git_in(&sub, &["commit", "-q", "-m", "v1"]).ok();
    let w = repo.worktree("auth");
    repo.git_in(&w, &["rm", "-q", "src/auth/vendor"]).ok();
    repo.git_in(
        &w,
        &["-c", "protocol.file.allow=always", "submodule", "add", "-q", sub.to_str().unwrap(), "src/auth/vendor"],
    )
    .ok();
    repo.git_in(&w, &["commit", "-q", "-m", "vendor becomes a submodule"]).ok();
    repo.boulder(&["prd", "done", "US-001"]).ok();
    base_moves(&repo);
    let r = repo.boulder(&["stream", "merge", "auth", "--force"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let vendor = repo.dir.join("src/auth/vendor");
    assert!(std::fs::symlink_metadata(&vendor).is_ok_and(|m| m.is_dir()), "no folder where the submodule goes");
    assert_eq!(status(&repo, &repo.dir), "");
}
