//! Calls of the `git` CLI, for what gix 0.90 cannot do. Every call says why it is here.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::error::{Error, Result};

/// A `git` command with a clean hook environment, run in `dir`.
pub fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).stdin(Stdio::null());
    // Hooks of ours must not re-enter when we run git.
    cmd.env("BOULDER_SKIP_HOOKS", "1");
    crate::context::export(&mut cmd);
    cmd
}

/// A `git` command as the user runs it, in `dir`: with git-boulder's hooks on, and `git-boulder`
/// on `PATH` being this very binary (the hooks call it).
///
/// Why the git CLI: the demo shows what the user's own `git add` and `git commit` do in a stream
/// worktree — hooks recording activity and checking ownership — and only git runs those.
pub fn as_user(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).stdin(Stdio::null());
    self_on_path(&mut cmd);
    cmd.env_remove("BOULDER_SKIP_HOOKS");
    crate::context::export(&mut cmd);
    cmd
}

/// `git hook run --ignore-missing post-merge -- 0` in the worktree `dir` a merge just moved, as
/// `git merge` runs it once it has updated a worktree (`0`: not a squash merge); its exit status
/// is ignored, as git ignores it. Its output goes to stderr, as under `git merge`.
///
/// Why the git CLI: the hook is the user's own (a hook manager's `npm install`, git-lfs's file
/// locking), and which file it is — `core.hooksPath`, a manager's folder — is git's to say. A git
/// older than 2.36 has no `git hook run`, and nothing runs.
pub fn post_merge(dir: &Path) {
    let mut cmd = as_user(dir);
    cmd.args(["hook", "run", "--ignore-missing", "post-merge", "--", "0"]).stdout(Stdio::null());
    let _ = cmd.status();
}

/// Put the folder of this very binary first on `cmd`'s `PATH`, so that what it runs — git's hooks,
/// an agent's `git boulder …` — finds this git-boulder even where none is installed (the demo,
/// run with `cargo run`).
pub fn self_on_path(cmd: &mut Command) {
    if let Some(bin_dir) = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.to_path_buf())) {
        let mut paths = vec![bin_dir];
        paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env("PATH", joined);
        }
    }
}

/// Run a prepared command and return its output, failing on a non-zero exit with git's stderr.
pub fn run(mut cmd: Command, what: &str) -> Result<Output> {
    let out = cmd.output().map_err(|e| Error::internal(format!("cannot run git to {what}: {e}")).with_source(e))?;
    if !out.status.success() {
        return Err(Error::internal(format!("git failed to {what}: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(out)
}

/// Start `cmd` with `input` on its stdin and its stderr captured, and wait for it: its output,
/// whatever its exit status (the caller's stdout setting is kept).
fn feed(mut cmd: Command, input: &[u8], what: &str) -> Result<Output> {
    use std::io::Write;
    cmd.stdin(Stdio::piped()).stderr(Stdio::piped());
    let mut child =
        cmd.spawn().map_err(|e| Error::internal(format!("cannot run git to {what}: {e}")).with_source(e))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A write error shows in git's exit status and stderr.
        let _ = stdin.write_all(input);
    }
    child.wait_with_output().map_err(|e| Error::internal(format!("git failed to {what}: {e}")).with_source(e))
}

/// [`run`] with `input` on the command's stdin.
pub fn run_with_input(cmd: Command, input: &[u8], what: &str) -> Result<Output> {
    let out = feed(cmd, input, what)?;
    if !out.status.success() {
        return Err(Error::internal(format!("git failed to {what}: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(out)
}

/// Write the files `paths` (as recorded in the index file `index_file`) of the worktree `work_dir`
/// whose git dir is `git_dir` into the folder `stage` instead, each at its path below it, from
/// where the caller renames them into place: `git checkout-index -f -z --stdin --prefix=STAGE/`.
///
/// Why the git CLI: files must reach a worktree exactly as `git checkout` writes them — converted
/// by `.gitattributes` (`text`, `eol`, `ident`, `working-tree-encoding`) and by every configured
/// filter driver (`filter.<driver>.smudge` and `.process`, git-lfs among them). That is git's
/// behaviour to match, not ours to re-implement. Attributes are read as for the worktree's paths
/// (the prefix does not change which rules apply). The index file is a private one
/// (`GIT_INDEX_FILE`), read only: the worktree's own index (whose lock the caller holds) is not
/// touched.
pub fn checkout_index(git_dir: &Path, work_dir: &Path, index_file: &Path, stage: &Path, paths: &[&[u8]]) -> Result<()> {
    let mut cmd = git(work_dir);
    for var in ["GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX", "GIT_NAMESPACE"] {
        cmd.env_remove(var);
    }
    cmd.env("GIT_DIR", git_dir)
        .env("GIT_WORK_TREE", work_dir)
        .env("GIT_INDEX_FILE", index_file)
        .args(["checkout-index", "-f", "-z", "--stdin"])
        .arg({
            let mut prefix = std::ffi::OsString::from("--prefix=");
            prefix.push(stage.as_os_str());
            prefix.push("/");
            prefix
        })
        .stdout(Stdio::null());
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p);
        input.push(0);
    }
    let out = feed(cmd, &input, "write files with checkout-index")?;
    if !out.status.success() || !out.stderr.is_empty() && String::from_utf8_lossy(&out.stderr).contains("error:") {
        return Err(Error::internal(format!(
            "git checkout-index could not write files into {}: {}",
            work_dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

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

/// `git sparse-checkout reapply` in `work_dir`.
///
/// Why the git CLI: which paths a sparse checkout holds is decided by git's own pattern rules
/// (cone or not); after a merge added paths, git applies them as `git merge` would have.
pub fn sparse_reapply(work_dir: &Path) -> Result<()> {
    let mut cmd = git(work_dir);
    cmd.args(["sparse-checkout", "reapply"]);
    run(cmd, "apply the sparse-checkout patterns").map(|_| ())
}

/// Widen the sparse checkout of the worktree `work_dir` by `dirs` (`None`: to the whole tree),
/// and write the files that brings in. In cone mode the folders are added as they are; otherwise
/// each as the pattern `/<dir>/`.
///
/// Why the git CLI: `git sparse-checkout add` (or `disable`) writes the patterns and the newly
/// included files exactly as git does, filters and all; gix 0.90 has no sparse-checkout writer.
pub fn sparse_widen(work_dir: &Path, cone: bool, dirs: Option<&[String]>) -> Result<()> {
    let mut cmd = git(work_dir);
    match dirs {
        None => {
            cmd.args(["sparse-checkout", "disable"]);
        }
        Some(dirs) => {
            cmd.args(["sparse-checkout", "add", "--skip-checks", "--"]);
            if cone {
                cmd.args(dirs);
            } else {
                cmd.args(dirs.iter().map(|d| format!("/{d}/")));
            }
        }
    }
    run(cmd, "widen the worktree's sparse checkout").map(|_| ())
}

/// What `git push --porcelain` said about one ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedRef {
    /// The remote ref (`refs/boulder/streams/auth`).
    pub remote_ref: String,
    /// What happened to it (git's flag character).
    pub flag: PushFlag,
    /// git's summary, e.g. `[rejected] (non-fast-forward)` or `[new reference]`.
    pub summary: String,
}

/// The flag of a `git push --porcelain` ref line: what happened to the ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushFlag {
    /// `' '`: moved forward.
    FastForward,
    /// `'+'`: forced.
    Forced,
    /// `'-'`: deleted.
    Deleted,
    /// `'*'`: created.
    New,
    /// `'='`: already there.
    UpToDate,
    /// `'!'`: rejected (by the remote, or as not a fast-forward).
    Rejected,
}

impl PushFlag {
    fn of(flag: char) -> Option<PushFlag> {
        Some(match flag {
            ' ' => PushFlag::FastForward,
            '+' => PushFlag::Forced,
            '-' => PushFlag::Deleted,
            '*' => PushFlag::New,
            '=' => PushFlag::UpToDate,
            '!' => PushFlag::Rejected,
            _ => return None,
        })
    }
}

impl PushedRef {
    pub fn rejected(&self) -> bool {
        self.flag == PushFlag::Rejected
    }

    /// Rejected because the remote's ref is not what this side expected — it moved meanwhile
    /// (`[rejected] (fetch first)`, `(non-fast-forward)`, or a lease's `(stale info)`): pulling
    /// and trying again can succeed.
    pub fn lost_race(&self) -> bool {
        self.rejected()
            && self.summary.starts_with("[rejected]")
            && ["fetch first", "non-fast-forward", "stale info"].iter().any(|w| self.summary.contains(w))
    }

    /// Rejected by the server itself (a hook, a `receive.*` rule: `[remote rejected] (…)`), or for
    /// any other reason than a lost race: trying again gets the same answer.
    pub fn refused(&self) -> bool {
        self.rejected() && !self.lost_race()
    }
}

/// What one `git push` did: per ref, and the server's own words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pushed {
    pub refs: Vec<PushedRef>,
    /// The `remote: …` lines git printed: what the server (its hooks) said, in order.
    pub remote_lines: Vec<String>,
}

impl Pushed {
    /// The server's words as one block for messages (empty when it said nothing).
    pub fn server_said(&self) -> String {
        self.remote_lines.join("\n")
    }
}

/// The `remote:` lines of git's stderr, trailing padding removed, empty ones dropped.
pub fn remote_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .map(|l| l.trim_end_matches(['\r', ' ']))
        .filter(|l| l.starts_with("remote:") && !l["remote:".len()..].trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parse the ref lines of `git push --porcelain` (`<flag>\t<from>:<to>\t<summary>`), ignoring
/// everything else (the `To <url>` line, `Done`, and whatever hooks or the remote printed).
pub fn parse_porcelain(stdout: &str) -> Vec<PushedRef> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in stdout.lines() {
        if line.starts_with("To ") {
            in_block = true;
            continue;
        }
        if line == "Done" {
            in_block = false;
            continue;
        }
        if !in_block {
            continue;
        }
        let mut parts = line.splitn(3, '\t');
        let (Some(flag), Some(refs), summary) = (parts.next(), parts.next(), parts.next()) else { continue };
        let mut chars = flag.chars();
        let (Some(f), None) = (chars.next(), chars.next()) else { continue };
        let Some(f) = PushFlag::of(f) else { continue };
        let Some((_, to)) = refs.split_once(':') else { continue };
        out.push(PushedRef { remote_ref: to.to_string(), flag: f, summary: summary.unwrap_or("").to_string() });
    }
    out
}

/// `git push --porcelain --no-verify REMOTE REFSPEC…` with extra `options` (e.g.
/// `--force-with-lease=…`), run in `dir`.
///
/// Why the git CLI: gix 0.90 has no push. Why `--no-verify`: these pushes carry git-boulder's own
/// state refs, not the user's branches, so the user's pre-push hooks (and ours) have nothing to
/// judge. Per-ref results come from the porcelain lines, never from text a hook or the remote printed.
/// A failed push with no ref lines (remote unreachable, authentication) is an error with git's words.
/// What the server printed (`remote:` lines on stderr, e.g. a pre-receive hook's reason) comes
/// back with the refs.
pub fn push(dir: &Path, remote: &str, options: &[String], refspecs: &[String]) -> Result<Pushed> {
    let mut cmd = git(dir);
    // A remote configured as a mirror (`remote.NAME.mirror`) makes git refuse any refspec
    // ("--mirror can't be combined with refspecs"): these pushes name exactly their refs.
    if !remote.is_empty() && !remote.contains(['/', ':', '=', '\\']) {
        cmd.arg("-c").arg(format!("remote.{remote}.mirror=false"));
    }
    cmd.args(["push", "--porcelain", "--no-verify"]).args(options).arg("--").arg(remote).args(refspecs);
    let out = cmd.output().map_err(|e| Error::internal(format!("cannot run git push: {e}")).with_source(e))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let refs = parse_porcelain(&stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && refs.is_empty() {
        return Err(Error::refused(format!("git push to {remote} failed: {}", stderr.trim()))
            .hint("check that `git push` to that remote works from here (URL, credentials, permissions)"));
    }
    Ok(Pushed { refs, remote_lines: remote_lines(&stderr) })
}

/// `git push --porcelain --no-verify --atomic --force-with-lease=REF:EXPECTED… REMOTE REFSPEC…`:
/// the merge queue landing a stream on a remote's base branch, all refs or none, each only if the
/// remote's ref still holds what the merge was checked against (`None`: the ref must not exist).
///
/// Why the git CLI: gix 0.90 has no push, and the compare-and-swap must happen on the server, which
/// is what git's lease does. Why `--no-verify`: the merge already ran the ownership check pre-push
/// would run on exactly these commits, and `verify` on the result; the user's own pre-push hooks
/// run when they push their branches themselves.
pub fn push_leased(
    dir: &Path,
    remote: &str,
    leases: &[(String, Option<String>)],
    refspecs: &[String],
) -> Result<Pushed> {
    let mut options = vec!["--atomic".to_string()];
    for (name, expected) in leases {
        options.push(format!("--force-with-lease={name}:{}", expected.as_deref().unwrap_or("")));
    }
    push(dir, remote, &options, refspecs)
}

/// One ref a push is about to update, as git tells a pre-push hook: the local ref and commit, the
/// remote ref and the commit it holds there (`None`: it does not exist there yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushUpdate {
    pub local_ref: String,
    pub local: String,
    pub remote_ref: String,
    pub remote: Option<String>,
}

/// `git lfs pre-push REMOTE REMOTE`, fed the ref lines git feeds a pre-push hook: upload the
/// git-lfs objects the pushed commits name that the remote lacks, before the push that names them.
///
/// Why the git CLI: the merge queue pushes with `--no-verify` (see [`push_leased`]), so git-lfs's
/// own pre-push hook does not run; without this step the remote's branch would name LFS files
/// whose content only this machine has. Only git-lfs knows its endpoints, credentials and
/// transfer adapters, and its pre-push command is the contract git itself uses.
pub fn lfs_pre_push(dir: &Path, remote: &str, updates: &[PushUpdate]) -> Result<()> {
    use std::io::Write;
    const ZERO: &str = "0000000000000000000000000000000000000000";
    let mut cmd = git(dir);
    cmd.args(["lfs", "pre-push", remote, remote]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child =
        cmd.spawn().map_err(|e| Error::internal(format!("cannot run git lfs pre-push: {e}")).with_source(e))?;
    let mut lines = String::new();
    for u in updates {
        lines.push_str(&format!(
            "{} {} {} {}\n",
            u.local_ref,
            u.local,
            u.remote_ref,
            u.remote.as_deref().unwrap_or(ZERO)
        ));
    }
    if let Some(mut stdin) = child.stdin.take() {
        // A git-lfs that exits early (nothing to send) may close its end first: not an error.
        let _ = stdin.write_all(lines.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::internal(format!("cannot run git lfs pre-push: {e}")).with_source(e))?;
    if !out.status.success() {
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        return Err(Error::refused(format!(
            "the git-lfs files of the merge could not be uploaded to {remote}, so nothing was pushed there: {}",
            said.trim()
        ))
        .hint(format!("check that `git lfs push {remote} --all` works from here, then rerun the same command")));
    }
    Ok(())
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

/// Commit the files `paths` (relative to `dir`) of the worktree `dir` as they are on disk, and
/// nothing else that may be staged: `git add -f -- PATHS` (asked for by name, so even when an
/// exclude rule matches them) then `git commit -q -m MESSAGE -- PATHS`.
///
/// Why the git CLI: this is a commit of the user's own project files (`agent install --commit`),
/// made as the user makes it — with their identity, signing and commit hooks (git-boulder's
/// ownership check among them) — which only git itself does.
///
/// When the commit does not happen (a commit hook refused it, say), the index entries of `paths`
/// are put back as they were before the `git add` — `git ls-files -s` read first, then
/// `git update-index --index-info` (or `--force-remove` for a path the index did not hold): the
/// same plumbing git's own porcelain stands on, and the index is git's file to write.
pub fn commit_paths(dir: &Path, paths: &[&str], message: &str) -> Result<()> {
    let mut ls = as_user(dir);
    ls.args(["ls-files", "-s", "-z", "--"]).args(paths);
    let before = run(ls, "read the index entries of the harness files")?.stdout;
    let mut add = as_user(dir);
    add.args(["add", "-f", "--"]).args(paths);
    run(add, "stage the harness files")?;
    let mut commit = as_user(dir);
    commit.args(["commit", "-q", "-m", message, "--"]).args(paths);
    let out = commit.output().map_err(|e| Error::internal(format!("cannot run git commit: {e}")).with_source(e))?;
    if !out.status.success() {
        let why = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let mut err = Error::refused(format!("git commit failed: {}", why.trim()));
        if let Err(e) = restore_index(dir, paths, &before) {
            err = err.hint(format!(
                "the harness files stay staged ({}): git restore --staged -- {}",
                e.message,
                paths.join(" ")
            ));
        }
        return Err(err);
    }
    Ok(())
}

/// Put the index entries of `paths` back to `before` (`git ls-files -s -z` output).
fn restore_index(dir: &Path, paths: &[&str], before: &[u8]) -> Result<()> {
    let held: Vec<&str> = before
        .split(|b| *b == 0)
        .filter_map(|rec| std::str::from_utf8(rec).ok())
        .filter_map(|rec| rec.split_once('\t').map(|(_, path)| path))
        .collect();
    let gone: Vec<&str> = paths.iter().copied().filter(|p| !held.contains(p)).collect();
    if !gone.is_empty() {
        let mut rm = as_user(dir);
        rm.args(["update-index", "--force-remove", "--"]).args(&gone);
        run(rm, "unstage the harness files")?;
    }
    if !before.is_empty() {
        let mut info = as_user(dir);
        info.args(["update-index", "-z", "--index-info"]).stdout(Stdio::null());
        run_with_input(info, before, "restore the index")?;
    }
    Ok(())
}

/// Pack the objects reachable from `tips` and not from `packed` that are still loose into one
/// new pack, then delete the loose copies of every packed object: `git pack-objects --revs
/// --unpacked` (revisions on stdin) and `git prune-packed`. Returns how many objects the new pack
/// holds.
///
/// Why the git CLI: gix 0.90 writes packs only as a fetch receives them; it has no pack-objects
/// (object enumeration, delta search, index writing) and no prune-packed. These two commands are
/// also exactly what `git gc` does for the same objects, so the result is what git itself reads
/// best; auto maintenance is left out (this is the maintenance).
pub fn pack_objects(dir: &Path, objects_dir: &Path, tips: &[String], packed: &[String]) -> Result<usize> {
    let mut cmd = git(dir);
    cmd.arg("pack-objects")
        .args(["--revs", "--unpacked", "--quiet", "--non-empty"])
        .arg(objects_dir.join("pack").join("pack"))
        .stdout(Stdio::piped());
    let mut input = String::new();
    for t in tips {
        input.push_str(t);
        input.push('\n');
    }
    if !packed.is_empty() {
        input.push_str("--not\n");
        for t in packed {
            input.push_str(t);
            input.push('\n');
        }
    }
    let out = run_with_input(cmd, input.as_bytes(), "pack the state objects")?;
    // The name of the pack written, if any: then its index says how many objects it holds.
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let count = if name.is_empty() {
        0
    } else {
        let idx = objects_dir.join("pack").join(format!("pack-{name}.idx"));
        idx_count(&idx).unwrap_or(0)
    };
    let mut prune = git(dir);
    prune.args(["prune-packed", "--quiet"]);
    run(prune, "delete the loose copies of packed objects")?;
    Ok(count)
}

/// Add the commits reachable from `tips` to the repository's commit-graph, as a new layer of a
/// split graph (what is there already is kept): `git commit-graph write --split --append
/// --stdin-commits`.
///
/// Why the git CLI: gix 0.90 reads commit-graphs but cannot write one. git's own `gc` writes
/// the same file for every ref, so git and git-boulder read the same graph.
pub fn write_commit_graph(dir: &Path, tips: &[String]) -> Result<()> {
    let mut cmd = git(dir);
    cmd.args(["commit-graph", "write", "--split", "--append", "--stdin-commits", "--no-progress"])
        .stdout(Stdio::null());
    run_with_input(cmd, tips.join("\n").as_bytes(), "write the commit-graph")?;
    Ok(())
}

/// The number of objects a pack index (version 2) lists: the last entry of its fan-out table.
fn idx_count(idx: &Path) -> Option<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(idx).ok()?;
    f.seek(SeekFrom::Start(8 + 255 * 4)).ok()?;
    let mut b = [0u8; 4];
    f.read_exact(&mut b).ok()?;
    Some(u32::from_be_bytes(b) as usize)
}

/// The patch id of each of `commits` that has one (a commit that changes nothing, and a merge
/// commit, has none), as `git diff-tree --stdin -p | git patch-id --stable` computes it.
///
/// Why the git CLI: "the same change after a rebase" is git's patch id (what `git cherry` and
/// `git rebase` use to drop commits already upstream), whose exact definition — the diff text
/// without line numbers or whitespace, hashed — is git's to say. Asked only for commits a
/// landing could not account for otherwise, rarely more than a few.
pub fn patch_ids(
    dir: &Path,
    commits: &[crate::git::ObjectId],
) -> Result<std::collections::HashMap<crate::git::ObjectId, String>> {
    let mut out = std::collections::HashMap::new();
    if commits.is_empty() {
        return Ok(out);
    }
    let mut input = String::new();
    for c in commits {
        input.push_str(&c.to_string());
        input.push('\n');
    }
    let mut diff = git(dir);
    diff.args(["diff-tree", "--stdin", "-p", "--no-color", "--no-ext-diff", "--no-renames", "--no-textconv"]);
    diff.stdout(Stdio::piped());
    let patches = run_with_input(diff, input.as_bytes(), "diff the commits a landing checks")?;
    let mut ids = git(dir);
    ids.args(["patch-id", "--stable"]).stdout(Stdio::piped());
    let listed = run_with_input(ids, &patches.stdout, "compute patch ids")?;
    for line in String::from_utf8_lossy(&listed.stdout).lines() {
        let mut parts = line.split_whitespace();
        if let (Some(patch), Some(commit)) = (parts.next(), parts.next()) {
            if let Ok(c) = crate::git::ObjectId::from_hex(commit.as_bytes()) {
                out.insert(c, patch.to_string());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_lines_are_parsed_and_noise_ignored() {
        let text = "hook says hi\t*\tx:y\nTo /tmp/remote.git\n=\trefs/boulder/prd:refs/boulder/prd\t[up to date]\n \trefs/boulder/streams/a:refs/boulder/streams/a\t1a2b..3c4d\n!\trefs/notes/boulder:refs/notes/boulder\t[rejected] (fetch first)\n*\tabc:refs/boulder/claims/x\t[new reference]\nDone\n!\tfake:refs/after\t[rejected]\n";
        let refs = parse_porcelain(text);
        assert_eq!(refs.len(), 4);
        assert_eq!(refs[0].flag, PushFlag::UpToDate);
        assert_eq!(refs[1].remote_ref, "refs/boulder/streams/a");
        assert!(refs[2].rejected() && refs[2].summary.contains("fetch first"));
        assert_eq!(refs[3].remote_ref, "refs/boulder/claims/x");
        assert!(refs[2].lost_race() && !refs[2].refused());
    }

    #[test]
    fn server_refusals_are_not_races() {
        let text = "To /r.git\n!\tHEAD:refs/boulder/x\t[remote rejected] (pre-receive hook declined)\n!\ta:refs/boulder/y\t[rejected] (stale info)\n!\ta:refs/boulder/z\t[remote rejected] (non-fast-forward)\nDone\n";
        let refs = parse_porcelain(text);
        assert!(refs[0].refused() && !refs[0].lost_race());
        assert!(refs[1].lost_race());
        assert!(refs[2].refused(), "a server rule against non-fast-forwards is no race");
        let lines = remote_lines("remote: remote says no: policy        \nremote: \nerror: failed to push some refs\n");
        assert_eq!(lines, vec!["remote: remote says no: policy".to_string()]);
    }

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

/// How a `git rebase` step in a worktree ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebaseStep {
    /// The rebase finished (or there was nothing to do).
    Finished,
    /// It stopped with files left unmerged; git's own words on stderr.
    Stopped(String),
}

/// `git rebase ONTO` in the stream worktree `work_dir`, or `git rebase --continue` (`onto`
/// `None`), as the user would run it: git-boulder's hooks on (post-rewrite carries each replayed
/// commit's note over), no editor (`GIT_EDITOR=true` keeps each message).
///
/// Why the git CLI: a rebase that stops on conflicts must leave the worktree exactly as git's own
/// does — conflict markers written through the checkout filters, the index's stages, the
/// `rebase-merge` folder that `git status` and the agent's own `git rebase --continue` understand —
/// so that what the agent is handed is an ordinary git rebase in progress.
pub fn rebase(work_dir: &Path, onto: Option<&str>) -> Result<RebaseStep> {
    let mut cmd = as_user(work_dir);
    cmd.env("GIT_EDITOR", "true").stdout(Stdio::null()).stderr(Stdio::piped());
    match onto {
        Some(onto) => cmd.args(["-c", "rebase.autoStash=false", "rebase", "--no-autosquash", onto]),
        None => cmd.args(["rebase", "--continue"]),
    };
    let what = if onto.is_some() { "rebase the stream" } else { "continue the rebase" };
    let out = cmd.output().map_err(|e| Error::internal(format!("cannot run git to {what}: {e}")).with_source(e))?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        return Ok(RebaseStep::Finished);
    }
    if rebase_in_progress(work_dir) {
        return Ok(RebaseStep::Stopped(said));
    }
    Err(Error::internal(format!("git failed to {what}: {said}")))
}

/// `git rebase --abort` in `work_dir`: the branch and the worktree back as they were before it.
///
/// Why the git CLI: only git knows every piece of its own rebase state to undo.
pub fn rebase_abort(work_dir: &Path) -> Result<()> {
    let mut cmd = as_user(work_dir);
    cmd.args(["rebase", "--abort"]);
    run(cmd, "abort the rebase").map(|_| ())
}

/// Is a rebase stopped in the worktree `work_dir` (git's `rebase-merge` or `rebase-apply` folder
/// in its admin dir)?
pub fn rebase_in_progress(work_dir: &Path) -> bool {
    let admin = super::worktree::dot_git_target(work_dir).unwrap_or_else(|| work_dir.join(".git"));
    ["rebase-merge", "rebase-apply"].iter().any(|d| admin.join(d).is_dir())
}

/// The unmerged entries of the index of `work_dir`: (stage, blob, path), as `git ls-files -u -z`
/// lists them.
///
/// Why the git CLI: the index of a rebase stopped by git, with its conflict stages, is read the
/// way git wrote it.
pub fn unmerged(work_dir: &Path) -> Result<Vec<(u8, String, String)>> {
    let mut cmd = git(work_dir);
    cmd.args(["ls-files", "-u", "-z"]);
    let out = run(cmd, "list the unmerged files")?;
    let mut found = Vec::new();
    for rec in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rec = String::from_utf8_lossy(rec);
        let Some((meta, path)) = rec.split_once('\t') else { continue };
        let mut parts = meta.split(' ');
        let (_mode, blob, stage) = (parts.next(), parts.next(), parts.next());
        if let (Some(blob), Some(stage)) = (blob, stage.and_then(|s| s.parse().ok())) {
            found.push((stage, blob.to_string(), path.to_string()));
        }
    }
    Ok(found)
}

/// Stage `path` of `work_dir` as it is in the worktree (`git add -- PATH`).
///
/// Why the git CLI: the file is staged through the clean filters and attributes, as the user's
/// `git add` would.
pub fn add_path(work_dir: &Path, path: &str) -> Result<()> {
    let mut cmd = git(work_dir);
    cmd.args(["add", "--", path]);
    run(cmd, "stage a resolved file").map(|_| ())
}

/// `git status --porcelain` of `work_dir` (untracked files included), as lines.
///
/// Why the git CLI: the worktree a rebase just left is judged exactly as `git status` sees it.
pub fn status_lines(work_dir: &Path) -> Result<Vec<String>> {
    let mut cmd = git(work_dir);
    cmd.args(["status", "--porcelain"]);
    let out = run(cmd, "look at the worktree")?;
    Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect())
}

/// One file's line counts (`None` for a binary file) and its path: what [`numstat`] returns.
pub type NumStat = (Option<u64>, Option<u64>, Vec<u8>);

/// Lines added and deleted per file from the merge base of `base` and `tip` to `tip` (`git diff
/// --numstat -z --no-renames BASE...TIP`): `(added, deleted, path)`, the counts `None` for a
/// binary file.
///
/// Why the git CLI: a reviewer compares these counts with what their own `git diff --stat`
/// says, so they are git's: its diff algorithm and its binary detection (`.gitattributes`
/// `-diff`, `binary`), which are git's behaviour to match.
pub fn numstat(dir: &Path, base: crate::git::ObjectId, tip: crate::git::ObjectId) -> Result<Vec<NumStat>> {
    let mut cmd = git(dir);
    cmd.args(["diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color"])
        .arg(format!("{base}...{tip}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = run(cmd, "count the lines a stream changes")?;
    let mut found = Vec::new();
    for rec in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let mut parts = rec.splitn(3, |b| *b == b'\t');
        let (Some(added), Some(deleted), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let count = |n: &[u8]| std::str::from_utf8(n).ok().and_then(|n| n.parse().ok());
        found.push((count(added), count(deleted), path.to_vec()));
    }
    Ok(found)
}

/// Show the diff from the merge base of `base` and `tip` to `tip` (`git diff BASE...TIP`) on this
/// process's stdout, paged as git pages it.
///
/// Why the git CLI: the reviewer reads git's own diff — their diff settings, colours and
/// `.gitattributes` drivers — through the pager git would start (`GIT_PAGER`, `core.pager`,
/// `pager.diff`, `PAGER`, `less` with `LESS=FRX`), and none when stdout is not a terminal: git's
/// behaviour is the contract.
pub fn diff_paged(dir: &Path, base: crate::git::ObjectId, tip: crate::git::ObjectId) -> Result<()> {
    let mut cmd = git(dir);
    cmd.arg("diff").arg(format!("{base}...{tip}"));
    let status =
        cmd.status().map_err(|e| Error::internal(format!("cannot run git to show the diff: {e}")).with_source(e))?;
    // A reader who quits the pager early is no failure (git exits 141 on the closed pipe).
    if !status.success() && status.code() != Some(141) && status.code().is_some() {
        return Err(Error::internal(format!("git diff {base}...{tip} failed ({status})")));
    }
    Ok(())
}
