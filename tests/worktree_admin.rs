//! The worktrees `stream init` makes for many streams at once are registered exactly as
//! `git worktree add` registers one: the same admin files with the same contents (`gitdir`,
//! `commondir`, `HEAD`, the folder's `.git` file; no `locked` left), listed by
//! `git worktree list --porcelain` as whole, left as they are by `git worktree repair`, with a
//! clean `git status` and `git fsck --strict`. Checked against a worktree plain git makes in the
//! same repository.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;

const STREAMS: usize = 30;

fn repo() -> TestRepo {
    let mut plan = String::from("version: 1\nstreams:\n");
    let mut prd = String::from("# PRD\n\n");
    for i in 0..STREAMS {
        plan.push_str(&format!("  s{i:02}:\n    stories: [US-{i:03}]\n    paths: ['src/s{i:02}/**']\n"));
        prd.push_str(&format!("### [ ] US-{i:03}: part {i}\nx\n\n"));
    }
    plan.push_str("settings:\n  base_branch: main\n");
    let mut files = vec![(".boulder/streams.yaml".to_string(), plan), (".agents/tasks/prd.md".to_string(), prd)];
    for i in 0..STREAMS {
        files.push((format!("src/s{i:02}/mod.rs"), format!("// {i}\n")));
    }
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    TestRepo::with_files(&refs)
}

/// Every file under the admin dir `worktrees/<id>` (relative path → content), and the folder's
/// `.git` file.
fn admin_files(repo: &TestRepo, id: &str, folder: &Path) -> (BTreeMap<String, String>, String) {
    let admin = repo.dir.join(".git/worktrees").join(id);
    let mut out = BTreeMap::new();
    let mut stack = vec![admin.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&admin).unwrap().to_string_lossy().into_owned();
                out.insert(rel, String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned());
            }
        }
    }
    (out, std::fs::read_to_string(folder.join(".git")).unwrap())
}

#[test]
fn many_streams_are_registered_exactly_as_git_worktree_add_registers_one() {
    let repo = repo();
    // git's own, made first: the streams' admin dirs must not push it aside.
    repo.git(&["branch", "by-git", "main"]).ok();
    let by_git = repo.dir.join(".boulder/worktrees/zz-by-git");
    repo.git(&["worktree", "add", "-q", by_git.to_str().unwrap(), "by-git"]).ok();
    let (git_files, git_dot_git) = admin_files(&repo, "zz-by-git", &by_git);

    repo.boulder(&["stream", "init", "--no-hooks"]).ok();

    let list = repo.git_out(&["worktree", "list", "--porcelain"]);
    let tip = repo.git_out(&["rev-parse", "main"]);
    let mut before = BTreeMap::new();
    for i in 0..STREAMS {
        let name = format!("s{i:02}");
        let wt = repo.worktree(&name);
        let (files, dot_git) = admin_files(&repo, &name, &wt);
        // The registration files say what git's say, for this path and branch.
        let swap =
            |s: &str| s.replace("zz-by-git", &name).replace("refs/heads/by-git", &format!("refs/heads/boulder/{name}"));
        for f in ["gitdir", "commondir", "HEAD"] {
            assert_eq!(files.get(f), git_files.get(f).map(|c| swap(c)).as_ref(), "{name}: {f}");
        }
        assert_eq!(dot_git, swap(&git_dot_git), "{name}: .git");
        let names: Vec<&String> = files.keys().collect();
        assert!(!files.contains_key("locked"), "{name} is left locked: {names:?}");
        assert!(files.contains_key("index") && files.contains_key("logs/HEAD"), "{name}: {names:?}");
        // Every file git's own admin dir has, except what its internal `git reset` leaves.
        for f in git_files.keys().filter(|f| f.as_str() != "ORIG_HEAD") {
            assert!(files.contains_key(f), "{name} lacks {f}: {names:?}");
        }
        let entry = format!("worktree {}\nHEAD {tip}\nbranch refs/heads/boulder/{name}\n", wt.display());
        assert!(list.contains(&entry), "{name} is not listed whole:\n{list}");
        assert!(!repo.porcelain_dirty(&wt), "{name} is not clean");
        before.insert(name, (files, dot_git));
    }
    assert!(!list.contains("locked") && !list.contains("prunable"), "{list}");

    // `git worktree repair` finds nothing to repair: it says nothing and changes no file.
    let repair = repo.git(&["worktree", "repair"]).ok();
    assert_eq!(format!("{}{}", repair.stdout, repair.stderr), "");
    for (name, was) in &before {
        assert_eq!(&admin_files(&repo, name, &repo.worktree(name)), was, "{name} changed on repair");
    }
    assert_eq!(repo.git_out(&["status", "--porcelain"]), "");
    repo.assert_fsck();
}
