//! `git fetch`: refs a fetch wrote (or would write, as a dry run), refspecs mapped both ways, and
//! the objects a partial clone lacks fetched in one batch.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{git, run, run_with_input};
use crate::error::{Error, Result};

/// The objects `git rev-list --objects --missing=print ARGS` names as missing (`?<id>` lines):
/// those a partial clone has not fetched, among everything `args` reach.
///
/// Why the git CLI: which objects a partial clone lacks and may fetch is git's promisor
/// bookkeeping; `--missing=print` lists them without fetching one by one.
pub fn missing_objects(git_dir: &Path, args: &[String]) -> Result<Vec<String>> {
    let mut cmd = git(git_dir);
    cmd.env("GIT_DIR", git_dir).args(["rev-list", "--objects", "--missing=print"]).args(args);
    let out = run(cmd, "list the objects this partial clone has not fetched")?;
    Ok(String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.strip_prefix('?')).map(str::to_string).collect())
}

/// Fetch the objects `ids` from the promisor remote `remote` of a partial clone, in one batch,
/// the way git itself fetches what a checkout or a merge of such a clone needs.
///
/// Why the git CLI: fetching from a promisor remote (transport, credentials, the partial-clone
/// filter) is git's; gix 0.90 reads only objects that are there.
pub fn fetch_objects(git_dir: &Path, remote: &str, ids: &[String]) -> Result<()> {
    let mut cmd = git(git_dir);
    cmd.env("GIT_DIR", git_dir)
        .args(["-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head"])
        .args(["--recurse-submodules=no", "--filter=blob:none", "--stdin", remote]);
    let mut input = String::new();
    for id in ids {
        input.push_str(id);
        input.push('\n');
    }
    run_with_input(cmd, input.as_bytes(), "fetch the objects this partial clone has not fetched yet").map(|_| ())
}

/// One ref a fetch wrote (or found up to date): the local ref and the id it now holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRef {
    pub local_ref: String,
    pub id: String,
    /// What git did with the local ref.
    pub local: Local,
}

/// What git did with the local ref of a fetched ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Local {
    /// It wrote it, or found it up to date.
    Written,
    /// It wrote nothing (`--dry-run`); the ref held this when git read it (`None`: absent).
    Left(Option<String>),
}

/// `git fetch REMOTE REFSPEC…` run in `dir`, returning every local ref the refspecs wrote or found
/// up to date — that is, every matching ref the remote has now.
///
/// Why the git CLI: a fetch must reach a remote the way the user's own `git fetch` does — their
/// credential helpers, ssh config, proxies, `url.<base>.insteadOf`, `http.*` settings — and git
/// is the one that knows all of them; it also keeps an HTTP client and TLS stack out of this
/// binary. The options keep it to exactly the refspecs given: no tags, no `FETCH_HEAD`, no
/// pruning whatever `fetch.prune` says, no opportunistic updates of configured tracking refs
/// (`--refmap=`), no submodules, no auto maintenance; and when every refspec is forced (`+`, as
/// pull's are), no check of which updates were forced (`--no-show-forced-updates`: it only
/// changes how a ref is reported).
///
/// The refs come from `--porcelain -v` (git 2.41 and later: `<flag> <old> <new> <local ref>`, the
/// up-to-date ones too). An older git, which does not know `--porcelain`, is asked with
/// `git ls-remote` first and the same fetch after; the ids are then read back from the local refs.
/// A refspec without a wildcard naming a ref the remote does not have is no error: that ref is
/// just absent from the result.
pub fn fetch(dir: &Path, remote: &str, refspecs: &[String]) -> Result<Vec<FetchedRef>> {
    start_fetch(dir, remote, refspecs, false)?.finish()
}

/// A [`fetch`] under way: `git fetch` runs while the caller does work that does not depend on
/// what it brings; [`RunningFetch::finish`] waits for it (and does what [`fetch`] does after).
pub struct RunningFetch {
    child: Option<std::process::Child>,
    dir: std::path::PathBuf,
    remote: String,
    refspecs: Vec<String>,
    objects_only: bool,
}

/// Start [`fetch`]: `git fetch --porcelain` is running when this returns.
///
/// `objects_only`: git brings the objects and reports the refs but writes none of them
/// (`--dry-run`), for a caller that writes them itself — in one transaction, where git writes
/// them one by one (measured: a third of a fetch of 100 new refs). The caller must then check
/// that every reported id is here and write the refs, or fetch again without it. A git without
/// `--porcelain` writes the refs anyway (see [`fetch`]).
pub fn start_fetch(dir: &Path, remote: &str, refspecs: &[String], objects_only: bool) -> Result<RunningFetch> {
    let child = fetch_command(dir, remote, refspecs, true, objects_only)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::internal(format!("cannot run git fetch: {e}")).with_source(e))?;
    Ok(RunningFetch {
        child: Some(child),
        dir: dir.to_path_buf(),
        remote: remote.to_string(),
        refspecs: refspecs.to_vec(),
        objects_only,
    })
}

impl RunningFetch {
    /// Wait for the fetch; the refs it wrote or found up to date, as [`fetch`] returns them.
    pub fn finish(mut self) -> Result<Vec<FetchedRef>> {
        let Some(child) = self.child.take() else { return Err(Error::internal("git fetch was already waited for")) };
        let out = child
            .wait_with_output()
            .map_err(|e| Error::internal(format!("cannot run git fetch: {e}")).with_source(e))?;
        let (dir, remote, refspecs) = (self.dir.as_path(), self.remote.as_str(), self.refspecs.as_slice());
        match fetched_once(dir, remote, refspecs, true, self.objects_only, out)? {
            Some(refs) => Ok(refs),
            None => fetch_listed(dir, remote, refspecs),
        }
    }
}

impl Drop for RunningFetch {
    /// A fetch never waited for (the caller failed meanwhile) is waited for here, leaving no
    /// `git` running behind the command; what it fetched stays, as after an interrupted fetch.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            drop(child.stdout.take());
            drop(child.stderr.take());
            let _ = child.wait();
        }
    }
}

const FETCH_OPTIONS: [&str; 6] = [
    "--no-tags",
    "--no-prune",
    "--no-write-fetch-head",
    "--no-recurse-submodules",
    "--no-auto-maintenance",
    "--refmap=",
];

/// One `git fetch`; `None` when `porcelain` was asked for and this git does not know it.
fn fetch_once(
    dir: &Path,
    remote: &str,
    refspecs: &[String],
    porcelain: bool,
    objects_only: bool,
) -> Result<Option<Vec<FetchedRef>>> {
    let out = fetch_command(dir, remote, refspecs, porcelain, objects_only)
        .output()
        .map_err(|e| Error::internal(format!("cannot run git fetch: {e}")).with_source(e))?;
    fetched_once(dir, remote, refspecs, porcelain, objects_only, out)
}

/// The `git fetch` of [`fetch_once`].
fn fetch_command(dir: &Path, remote: &str, refspecs: &[String], porcelain: bool, objects_only: bool) -> Command {
    let mut cmd = git(dir);
    // English messages: a missing exact ref is recognized by git's words below.
    cmd.env("LC_ALL", "C");
    // Every ref forced anyway: git's check of which updates were forced (a merge base per
    // updated ref) would only decide how a ref is reported, which nothing here reads. Only then,
    // since without the check git takes every update for a fast-forward.
    let forced = refspecs.iter().all(|s| s.starts_with('+'));
    if forced {
        cmd.args(["-c", "advice.fetchShowForcedUpdates=false"]);
    }
    cmd.arg("fetch").args(FETCH_OPTIONS);
    if porcelain {
        cmd.args(["--porcelain", "-v"]);
        // After `--porcelain`: a git too old for it stops there, and is asked without both.
        if objects_only {
            cmd.arg("--dry-run");
        }
        if forced {
            cmd.arg("--no-show-forced-updates");
        }
    } else {
        cmd.arg("--quiet");
    }
    cmd.arg("--").arg(remote).args(refspecs);
    cmd
}

/// What [`fetch_once`] makes of the finished `git fetch` (`out`).
fn fetched_once(
    dir: &Path,
    remote: &str,
    refspecs: &[String],
    porcelain: bool,
    objects_only: bool,
    out: std::process::Output,
) -> Result<Option<Vec<FetchedRef>>> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if porcelain && stderr.contains("porcelain") && out.status.code() == Some(129) {
            return Ok(None);
        }
        // An exact refspec whose source the remote lacks: fetch the others (wildcards and exact
        // refspecs that exist); the missing one is simply not there.
        if let Some(missing) = missing_remote_ref(&stderr) {
            let rest: Vec<String> = refspecs.iter().filter(|s| refspec_source(s) != missing).cloned().collect();
            if rest.len() < refspecs.len() {
                return if rest.is_empty() {
                    Ok(Some(Vec::new()))
                } else {
                    fetch_once(dir, remote, &rest, porcelain, objects_only)
                };
            }
        }
        return Err(fetch_failed(remote, &stderr));
    }
    Ok(Some(parse_fetch_porcelain(&String::from_utf8_lossy(&out.stdout), porcelain && objects_only)))
}

/// Fetch for a git without `fetch --porcelain`: list what the remote has, fetch, read back.
fn fetch_listed(dir: &Path, remote: &str, refspecs: &[String]) -> Result<Vec<FetchedRef>> {
    let mut cmd = git(dir);
    // The refspecs' sources as patterns: only what they can match comes back (git matches a
    // pattern against the end of a name; the mapping below keeps exact matches only).
    cmd.env("LC_ALL", "C")
        .args(["ls-remote", "--refs", "--"])
        .arg(remote)
        .args(refspecs.iter().map(|s| refspec_source(s)));
    let out = cmd.output().map_err(|e| Error::internal(format!("cannot run git ls-remote: {e}")).with_source(e))?;
    if !out.status.success() {
        return Err(fetch_failed(remote, &String::from_utf8_lossy(&out.stderr)));
    }
    let listed = String::from_utf8_lossy(&out.stdout);
    let locals: Vec<String> = listed
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter_map(|(_, name)| refspecs.iter().find_map(|s| refspec_map(s, name)))
        .collect();
    if locals.is_empty() {
        return Ok(Vec::new());
    }
    fetch_once(dir, remote, refspecs, false, false)?;
    let mut cmd = git(dir);
    cmd.args(["for-each-ref", "--format=%(objectname) %(refname)"]).args(&locals);
    let out = run(cmd, "read the fetched refs")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, name)| locals.iter().any(|l| l == name))
        .map(|(id, name)| FetchedRef { local_ref: name.to_string(), id: id.to_string(), local: Local::Written })
        .collect())
}

fn fetch_failed(remote: &str, stderr: &str) -> Error {
    let said: Vec<&str> = stderr.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    Error::refused(format!("cannot fetch from {remote}: {}", said.join("; ")))
        .hint("check the remote's URL (`git remote -v`) and that `git fetch` works from here")
}

/// The ref of git's "couldn't find remote ref X" (an exact refspec's source the remote lacks).
fn missing_remote_ref(stderr: &str) -> Option<&str> {
    stderr.lines().find_map(|l| l.split_once("couldn't find remote ref ")).map(|(_, r)| r.trim())
}

/// The source side of a refspec (`+refs/a/*:refs/b/*` → `refs/a/*`).
fn refspec_source(spec: &str) -> &str {
    let spec = spec.strip_prefix('+').unwrap_or(spec);
    spec.split_once(':').map_or(spec, |(src, _)| src)
}

/// Where the refspec `spec` puts the remote ref `name`, if it matches (one `*` at most per side).
fn refspec_map(spec: &str, name: &str) -> Option<String> {
    let spec = spec.strip_prefix('+').unwrap_or(spec);
    let (src, dst) = spec.split_once(':')?;
    match (src.split_once('*'), dst.split_once('*')) {
        (None, None) => (src == name).then(|| dst.to_string()),
        (Some((sp, ss)), Some((dp, ds))) => {
            let middle = name.strip_prefix(sp)?.strip_suffix(ss)?;
            Some(format!("{dp}{middle}{ds}"))
        }
        _ => None,
    }
}

/// The remote ref that `spec` maps to the local ref `local` (the reverse of [`refspec_map`]).
fn refspec_unmap(spec: &str, local: &str) -> Option<String> {
    let spec = spec.strip_prefix('+').unwrap_or(spec);
    let (src, dst) = spec.split_once(':')?;
    let flipped = format!("{dst}:{src}");
    refspec_map(&flipped, local)
}

/// The remote ref that one of `specs` maps to the local ref `local`. When several match (`refs/b/*`
/// and `refs/b/notes*` both cover `refs/b/notes`), the one whose destination spells out more of
/// the name wins, as the more specific mapping.
pub fn refspecs_unmap(specs: &[String], local: &str) -> Option<String> {
    specs
        .iter()
        .filter_map(|s| {
            let dst = s.split_once(':').map_or("", |(_, d)| d);
            Some((dst.len() - usize::from(dst.contains('*')), refspec_unmap(s, local)?))
        })
        .max_by_key(|(specific, _)| *specific)
        .map(|(_, remote)| remote)
}

/// Parse `git fetch --porcelain` lines (`<flag> <old-id> <new-id> <local ref>`); a rejected
/// update (`!`) keeps the local ref's old id, which is what the ref holds.
fn parse_fetch_porcelain(stdout: &str, dry_run: bool) -> Vec<FetchedRef> {
    stdout
        .lines()
        .filter_map(|line| {
            // The flag is one character, a space for a fast-forward: split after it.
            let flag = line.get(..1)?;
            let mut parts = line.get(1..)?.strip_prefix(' ')?.splitn(3, ' ');
            let (old, new, name) = (parts.next()?, parts.next()?, parts.next()?);
            let id = if flag == "!" { old } else { new };
            let hex = |s: &str| s.len() >= 40 && s.bytes().all(|b| b.is_ascii_hexdigit());
            let zero = |s: &str| s.bytes().all(|b| b == b'0');
            let local = if dry_run { Local::Left((!zero(old)).then(|| old.to_string())) } else { Local::Written };
            (flag.len() == 1 && hex(old) && hex(new) && flag != "-" && !zero(id)).then(|| FetchedRef {
                local_ref: name.to_string(),
                id: id.to_string(),
                local,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forced_update_check_is_skipped_only_when_every_refspec_is_forced() {
        let args = |specs: &[&str], porcelain: bool| -> Vec<String> {
            let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
            let cmd = fetch_command(Path::new("."), "origin", &specs, porcelain, porcelain);
            cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect()
        };
        let forced = args(&["+refs/boulder/*:refs/r/*", "+refs/notes/boulder*:refs/r/n*"], true);
        let at = |args: &[String], a: &str| args.iter().position(|x| x == a);
        let skip = at(&forced, "--no-show-forced-updates").expect("skipped for forced refspecs");
        // After --porcelain: a git that knows neither stops at --porcelain and is asked again.
        assert!(at(&forced, "--porcelain").is_some_and(|p| p < skip), "{forced:?}");
        assert!(at(&forced, "--").is_some_and(|d| skip < d), "{forced:?}");
        assert_eq!(forced[..2], ["-c".to_string(), "advice.fetchShowForcedUpdates=false".to_string()]);
        // One refspec without `+`: git must check, or it would take a rewind for a fast-forward.
        let mixed = args(&["+refs/boulder/*:refs/r/*", "refs/heads/main:refs/r/main"], true);
        assert!(at(&mixed, "--no-show-forced-updates").is_none(), "{mixed:?}");
        assert!(at(&args(&["+a:b"], false), "--no-show-forced-updates").is_none());
        // Objects only: asked after --porcelain too, and never of a fetch that is to write refs.
        assert!(at(&forced, "--dry-run").is_some_and(|d| at(&forced, "--porcelain").is_some_and(|p| p < d)));
        assert!(at(&args(&["+a:b"], false), "--dry-run").is_none());
    }

    #[test]
    fn fetch_porcelain_lines_are_parsed() {
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let text = format!(
            "* {z} {a} refs/boulder-remotes/o/streams/x\n= {a} {a} refs/boulder-remotes/o/prd\n  {a} {b} refs/boulder-remotes/o/ff\n+ {a} {b} refs/boulder-remotes/o/streams/y\n- {a} {z} refs/boulder-remotes/o/gone\n! {a} {b} refs/boulder-remotes/o/kept\nnoise here\n"
        );
        let refs = parse_fetch_porcelain(&text, false);
        let got: Vec<(&str, &str)> = refs.iter().map(|r| (r.local_ref.as_str(), r.id.as_str())).collect();
        assert_eq!(
            got,
            vec![
                ("refs/boulder-remotes/o/streams/x", a.as_str()),
                ("refs/boulder-remotes/o/prd", a.as_str()),
                ("refs/boulder-remotes/o/ff", b.as_str()),
                ("refs/boulder-remotes/o/streams/y", b.as_str()),
                ("refs/boulder-remotes/o/kept", a.as_str()),
            ]
        );
        assert!(refs.iter().all(|r| r.local == Local::Written));
        // A dry run wrote nothing: each ref is left as git read it, absent for a new one.
        let dry = parse_fetch_porcelain(&text, true);
        let left: Vec<Local> = dry.iter().map(|r| r.local.clone()).collect();
        let was = |id: &str| Local::Left(Some(id.to_string()));
        assert_eq!(left, vec![Local::Left(None), was(&a), was(&a), was(&a), was(&a)]);
    }

    #[test]
    fn refspecs_map_both_ways() {
        let spec = "+refs/boulder/*:refs/boulder-remotes/o/*";
        assert_eq!(refspec_map(spec, "refs/boulder/streams/a").as_deref(), Some("refs/boulder-remotes/o/streams/a"));
        assert_eq!(refspec_map(spec, "refs/heads/main"), None);
        assert_eq!(refspec_unmap(spec, "refs/boulder-remotes/o/streams/a").as_deref(), Some("refs/boulder/streams/a"));
        let notes = "+refs/notes/boulder*:refs/boulder-remotes/o/notes/boulder*";
        assert_eq!(refspec_map(notes, "refs/notes/boulder").as_deref(), Some("refs/boulder-remotes/o/notes/boulder"));
        let exact = "+refs/boulder/claims/s:refs/boulder-remotes/o/claims/s";
        assert_eq!(refspec_map(exact, "refs/boulder/claims/s2"), None);
        assert_eq!(refspec_unmap(exact, "refs/boulder-remotes/o/claims/s").as_deref(), Some("refs/boulder/claims/s"));
        assert_eq!(refspec_source(exact), "refs/boulder/claims/s");
        let both = [spec.to_string(), notes.to_string()];
        assert_eq!(
            refspecs_unmap(&both, "refs/boulder-remotes/o/notes/boulder").as_deref(),
            Some("refs/notes/boulder")
        );
        assert_eq!(refspecs_unmap(&both, "refs/boulder-remotes/o/prd").as_deref(), Some("refs/boulder/prd"));
        assert_eq!(
            missing_remote_ref("fatal: couldn't find remote ref refs/boulder/claims/s\n"),
            Some("refs/boulder/claims/s")
        );
    }
}
