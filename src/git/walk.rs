//! The commit walk pre-push uses: the paths pushed commits change, for the ownership check
//! ([`super::Repo::changed_paths`]); also what a merge reports as the stream's changes. One walk, then one tree
//! diff per commit against its first parent (all of its tree for a root commit). Renames show as
//! a deletion and an addition, so both paths count. The same paths as
//! `git diff-tree -r --no-renames --name-only`.
//!
//! ### Performance
//! * Each commit is read once, for its tree id; a commit's parent tree is the tree of the next
//!   commit of a linear walk, so it comes from that list.
//! * The diff is a merge of the two trees' raw entries ([`Trees::diff`]): no decoding into
//!   vectors, equal subtrees skipped by id, and within a large tree the common byte prefix and
//!   suffix of both sides skipped without comparing entries (a commit touches few entries).
//! * Trees are kept, decoded, for the diff under way and the one before it, so a tree the diff of
//!   one commit needs as its new side is not read again as the old side of the next diff.
//! * What is left is resolving tree deltas in packs. gix's pack cache keeps the object a lookup
//!   resolves, not the objects in between along its delta chain. So the order of the diffs
//!   matters: when each tree is a delta of the tree read just before, a lookup is one delta away
//!   from the cache; in the other order every lookup inflates its whole chain again, quadratic in
//!   the chain length (up to 50). `git repack` makes newer trees the bases (newest first is
//!   right); `git fast-import` and packs made like it chain newer trees on older ones (oldest
//!   first is right). [`oldest_first`] tells which from the packs' own headers; loose objects have
//!   no chains, and then the walk order stays. (gix does not cache an undeltified base either, so
//!   with `git repack`'s layout each tree still inflates its base once.)

use std::cmp::Ordering;
use std::collections::HashMap;
use std::rc::Rc;

use gix::bstr::ByteSlice;
use gix::objs::Find;
use gix::ObjectId;

use crate::error::{Error, Result};

impl super::Repo {
    /// The paths changed by each commit reachable from `tip` but not from `hidden`, in walk order
    /// (newest first), as `(commit, path)` pairs: the same paths as
    /// `git diff-tree -r --no-renames --name-only` against each commit's first parent. Paths are
    /// git's bytes, which need not be UTF-8.
    pub fn changed_paths(&self, tip: ObjectId, hidden: Vec<ObjectId>) -> Result<Vec<(String, Vec<u8>)>> {
        changed_paths(&self.repo, tip, hidden)
    }
}

/// One walked commit: its tree and its first parent.
struct Walked {
    id: ObjectId,
    tree: ObjectId,
    parent: Option<ObjectId>,
}

fn tree_of(repo: &gix::Repository, commit: ObjectId) -> Result<ObjectId> {
    repo.find_commit(commit)
        .and_then(|c| c.tree_id())
        .map(|t| t.detach())
        .map_err(|e| Error::internal(format!("commit {commit}: {e}")).with_source(e))
}

/// The paths changed by each commit reachable from `tip` but not from `hidden`, in walk order
/// (newest first), as `(commit, path)` pairs.
pub(crate) fn changed_paths(
    repo: &gix::Repository,
    tip: ObjectId,
    hidden: Vec<ObjectId>,
) -> Result<Vec<(String, Vec<u8>)>> {
    let walk = repo
        .rev_walk([tip])
        .with_hidden(hidden)
        .all()
        .map_err(|e| Error::internal(format!("cannot walk from {tip}: {e}")).with_source(e))?;
    let mut commits = Vec::new();
    for info in walk {
        let info = info.map_err(|e| Error::internal(format!("cannot walk from {tip}: {e}")).with_source(e))?;
        commits.push(Walked { id: info.id, tree: tree_of(repo, info.id)?, parent: info.parent_ids.first().copied() });
    }
    let tree_by_commit: HashMap<ObjectId, ObjectId> = commits.iter().map(|c| (c.id, c.tree)).collect();
    // (new tree, old tree) per commit, in walk order; `None` is the empty tree of a root commit.
    let mut pairs = Vec::with_capacity(commits.len());
    for c in &commits {
        let old = match c.parent {
            Some(p) => Some(match tree_by_commit.get(&p) {
                Some(t) => *t,
                None => tree_of(repo, p).map_err(|e| e.context(format!("parent of {}", c.id)))?,
            }),
            None => None,
        };
        pairs.push((c.tree, old));
    }

    let mut order: Vec<usize> = (0..commits.len()).collect();
    if oldest_first(repo, &pairs) {
        order.reverse();
    }
    let mut paths: Vec<Vec<Vec<u8>>> = vec![Vec::new(); commits.len()];
    let mut trees = Trees::new(repo);
    let mut path = Vec::new();
    for i in order {
        let (new, old) = pairs[i];
        trees
            .diff(old, Some(new), &mut path, &mut paths[i])
            .map_err(|e| e.context(format!("diff {}", commits[i].id)))?;
        trees.next_diff();
    }
    let mut out = Vec::new();
    for (c, ps) in commits.iter().zip(paths) {
        let hex = c.id.to_string();
        out.extend(ps.into_iter().map(|p| (hex.clone(), p)));
    }
    Ok(out)
}

/// Inflated tree data by id, for the diff under way and the one before it: a commit's parent tree and
/// the subtrees its diff descends into were the new side of the diff of the next commit (or the
/// other way round), so each tree is read and inflated once.
struct Trees<'r> {
    repo: &'r gix::Repository,
    hash_len: usize,
    current: HashMap<ObjectId, Rc<[u8]>>,
    previous: HashMap<ObjectId, Rc<[u8]>>,
    buf: Vec<u8>,
}

impl<'r> Trees<'r> {
    fn new(repo: &'r gix::Repository) -> Self {
        Trees {
            repo,
            hash_len: repo.object_hash().len_in_bytes(),
            current: HashMap::new(),
            previous: HashMap::new(),
            buf: Vec::new(),
        }
    }

    /// The data of tree `id`.
    fn get(&mut self, id: ObjectId) -> Result<Rc<[u8]>> {
        if let Some(t) = self.current.get(&id) {
            return Ok(t.clone());
        }
        let tree = match self.previous.remove(&id) {
            Some(t) => t,
            None => {
                let data = self
                    .repo
                    .objects
                    .try_find(&id, &mut self.buf)
                    .map_err(|e| Error::internal(format!("tree {id}: {e}")).with_source(e))?
                    .ok_or_else(|| Error::internal(format!("tree {id} is missing")))?;
                if data.kind != gix::object::Kind::Tree {
                    return Err(Error::internal(format!("{id} is a {}, not a tree", data.kind)));
                }
                Rc::from(data.data)
            }
        };
        self.current.insert(id, tree.clone());
        Ok(tree)
    }

    /// Forget the trees the diff before the last one needed.
    fn next_diff(&mut self) {
        self.previous = std::mem::take(&mut self.current);
    }

    /// Push onto `out` the path (under `path`) of every file, link or submodule that differs
    /// between the trees `old` and `new` (`None`: the empty tree). Trees are walked together in
    /// git's entry order; equal subtrees are skipped by id.
    fn diff(
        &mut self,
        old: Option<ObjectId>,
        new: Option<ObjectId>,
        path: &mut Vec<u8>,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        let old = old.map(|id| self.get(id)).transpose()?;
        let new = new.map(|id| self.get(id)).transpose()?;
        let mut a = Entries { data: old.as_deref().unwrap_or_default(), hash_len: self.hash_len };
        let mut b = Entries { data: new.as_deref().unwrap_or_default(), hash_len: self.hash_len };
        // A commit changes few entries of a large tree: the bytes before the first and after the
        // last change are the same on both sides. Entries wholly inside the common prefix are
        // skipped without comparing them, and the walk stops once what is left of both sides is
        // the same length and inside the common suffix (both are then at entry boundaries).
        let prefix = common_prefix(a.data, b.data);
        let suffix = common_suffix(&a.data[prefix..], &b.data[prefix..]);
        let skipped = a.skip_within(prefix);
        b.data = &b.data[skipped..];
        let (mut x, mut y) = (a.next_entry()?, b.next_entry()?);
        loop {
            if let (Some(ea), Some(eb)) = (&x, &y) {
                let left = a.data.len() + ea.len();
                if left == b.data.len() + eb.len() && left <= suffix {
                    return Ok(());
                }
            }
            let order = match (&x, &y) {
                (None, None) => return Ok(()),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(ea), Some(eb)) => ea.cmp_git(eb),
            };
            match order {
                Ordering::Less => {
                    let e = x.take().expect("an entry");
                    self.one_side(&e, Some(e.id()), None, path, out)?;
                    x = a.next_entry()?;
                }
                Ordering::Greater => {
                    let e = y.take().expect("an entry");
                    self.one_side(&e, None, Some(e.id()), path, out)?;
                    y = b.next_entry()?;
                }
                Ordering::Equal => {
                    let (ea, eb) = (x.take().expect("an entry"), y.take().expect("an entry"));
                    if ea.oid != eb.oid || ea.mode != eb.mode {
                        self.one_side(&eb, Some(ea.id()), Some(eb.id()), path, out)?;
                    }
                    (x, y) = (a.next_entry()?, b.next_entry()?);
                }
            }
        }
    }

    /// Entry `e` changed (its trees `old` and `new`, when it is one): record it or descend.
    fn one_side(
        &mut self,
        e: &Entry<'_>,
        old: Option<ObjectId>,
        new: Option<ObjectId>,
        path: &mut Vec<u8>,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        let len = path.len();
        if len > 0 {
            path.push(b'/');
        }
        path.extend_from_slice(e.name);
        if e.is_tree() {
            self.diff(old, new, path, out)?;
        } else {
            out.push(path.clone());
        }
        path.truncate(len);
        Ok(())
    }
}

/// One tree entry, undecoded: `<mode> <name>\0<id>`.
struct Entry<'a> {
    mode: &'a [u8],
    name: &'a [u8],
    oid: &'a [u8],
}

impl Entry<'_> {
    /// Its length in the tree's data.
    fn len(&self) -> usize {
        self.mode.len() + 1 + self.name.len() + 1 + self.oid.len()
    }

    fn is_tree(&self) -> bool {
        self.mode == b"40000" || self.mode == b"040000"
    }

    fn id(&self) -> ObjectId {
        ObjectId::from_bytes_or_panic(self.oid)
    }

    /// Git's order of tree entries: by name, a tree's name compared as if it ended in `/`.
    fn cmp_git(&self, other: &Entry<'_>) -> Ordering {
        let n = self.name.len().min(other.name.len());
        self.name[..n].cmp(&other.name[..n]).then_with(|| {
            let end = |e: &Entry<'_>| e.name.get(n).copied().unwrap_or(if e.is_tree() { b'/' } else { 0 });
            end(self).cmp(&end(other))
        })
    }
}

/// The entries of a tree's data, in order.
struct Entries<'a> {
    data: &'a [u8],
    hash_len: usize,
}

impl<'a> Entries<'a> {
    /// Skip the entries that end within the first `limit` bytes; returns how many bytes that is.
    /// The first NUL of an entry ends its name (modes and names hold none), and the id follows.
    fn skip_within(&mut self, limit: usize) -> usize {
        let mut at = 0;
        while let Some(nul) = self.data[at..limit.min(self.data.len())].find_byte(0) {
            let end = at + nul + 1 + self.hash_len;
            if end > limit {
                break;
            }
            at = end;
        }
        self.data = &self.data[at..];
        at
    }

    fn next_entry(&mut self) -> Result<Option<Entry<'a>>> {
        if self.data.is_empty() {
            return Ok(None);
        }
        let malformed = || Error::internal("a malformed tree object");
        let nul = self.data.find_byte(0).ok_or_else(malformed)?;
        let space = self.data[..nul].iter().position(|&c| c == b' ').ok_or_else(malformed)?;
        let end = nul + 1 + self.hash_len;
        if end > self.data.len() {
            return Err(malformed());
        }
        let entry =
            Entry { mode: &self.data[..space], name: &self.data[space + 1..nul], oid: &self.data[nul + 1..end] };
        self.data = &self.data[end..];
        Ok(Some(entry))
    }
}

/// The length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const CHUNK: usize = 128;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + CHUNK <= n && a[i..i + CHUNK] == b[i..i + CHUNK] {
        i += CHUNK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The length of the longest common suffix of `a` and `b`.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const CHUNK: usize = 128;
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = 0;
    while i + CHUNK <= n && a[n - i - CHUNK..n - i] == b[n - i - CHUNK..n - i] {
        i += CHUNK;
    }
    while i < n && a[n - i - 1] == b[n - i - 1] {
        i += 1;
    }
    i
}

/// Whether to diff the oldest commit first (see the module docs). The trees of up to 16 commits
/// spread over the walk are compared with their parents' by delta chain depth: a tree deeper than
/// its parent's is a delta on it (newer on older), a shallower one the other way round. Small
/// trees are often stored whole; then the first subtree that differs is compared instead, a few
/// levels down at most. Loose objects count for neither order.
fn oldest_first(repo: &gix::Repository, pairs: &[(ObjectId, Option<ObjectId>)]) -> bool {
    const SAMPLES: usize = 16;
    let step = (pairs.len() / SAMPLES).max(1);
    let mut vote = 0i32;
    for (new, old) in pairs.iter().step_by(step).take(SAMPLES) {
        if let Some(old) = old {
            vote += chain_direction(repo, *new, *old, 3);
        }
    }
    vote > 0
}

/// +1 when `new` is deeper in its delta chain than `old`, -1 when shallower, else the same for the
/// first subtree that differs between them (down to `levels` more levels), else 0.
fn chain_direction(repo: &gix::Repository, new: ObjectId, old: ObjectId, levels: u32) -> i32 {
    let depth = |id: ObjectId| repo.try_find_header(id).ok().flatten().and_then(|h| h.num_deltas());
    match (depth(new), depth(old)) {
        (Some(n), Some(o)) if n != o => return i32::from(n > o) - i32::from(n < o),
        (Some(_), Some(_)) if levels > 0 => {}
        _ => return 0,
    }
    let hash_len = repo.object_hash().len_in_bytes();
    let (mut new_buf, mut old_buf) = (Vec::new(), Vec::new());
    let data = |id: ObjectId, buf: &mut Vec<u8>| -> Option<Vec<u8>> {
        let d = repo.objects.try_find(&id, buf).ok()??;
        (d.kind == gix::object::Kind::Tree).then(|| d.data.to_vec())
    };
    let (Some(new_data), Some(old_data)) = (data(new, &mut new_buf), data(old, &mut old_buf)) else { return 0 };
    let mut a = Entries { data: &old_data, hash_len };
    let mut b = Entries { data: &new_data, hash_len };
    while let (Ok(Some(x)), Ok(Some(y))) = (a.next_entry(), b.next_entry()) {
        if x.name != y.name {
            return 0;
        }
        if x.oid != y.oid && x.is_tree() && y.is_tree() {
            return chain_direction(repo, y.id(), x.id(), levels - 1);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "T")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "T")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8")
    }

    fn write(dir: &Path, path: &str, text: &str) {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    fn commit(dir: &Path, msg: &str) {
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "--allow-empty", "-m", msg]);
    }

    /// What `git diff-tree` says each commit from `tip` down to the root changes (against its
    /// first parent), in `git rev-list` order.
    fn expected(dir: &Path, tip: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for c in git(dir, &["rev-list", tip]).lines() {
            let first_parent = git(dir, &["rev-list", "--parents", "-n1", c]);
            let args = match first_parent.split_whitespace().nth(1) {
                Some(p) => vec!["diff-tree", "-r", "--no-renames", "--name-only", p, c],
                None => vec!["diff-tree", "-r", "--no-renames", "--name-only", "--root", c],
            };
            let names = git(dir, &args);
            // Without --root and with two trees, diff-tree prints no commit line; with --root it does.
            for name in names.lines().filter(|l| *l != c) {
                out.push((c.to_string(), name.to_string()));
            }
        }
        out
    }

    fn actual(dir: &Path, tip: &str) -> Vec<(String, String)> {
        let repo = gix::open(dir).expect("open");
        let tip = ObjectId::from_hex(git(dir, &["rev-parse", tip]).trim().as_bytes()).expect("an id");
        let changes = changed_paths(&repo, tip, Vec::new()).expect("changed paths");
        changes.into_iter().map(|(c, p)| (c, String::from_utf8(p).expect("UTF-8 names"))).collect()
    }

    fn sorted(mut v: Vec<(String, String)>) -> Vec<(String, String)> {
        v.sort();
        v
    }

    #[test]
    fn changes_match_git_diff_tree_loose_and_packed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        // A large directory, names that sort differently as trees and as files, nesting.
        for i in 0..300 {
            write(dir, &format!("big/f{i:04}.txt"), &format!("{i}\n"));
        }
        for p in ["a.b", "a-b", "a/x", "a0", "ab/c/d.txt", "z"] {
            write(dir, p, p);
        }
        commit(dir, "root");
        write(dir, "big/f0150.txt", "changed\n"); // one entry in the middle of a large tree
        write(dir, "big/f0000a.txt", "new\n"); // an insertion near the start
        commit(dir, "modify and insert");
        std::fs::remove_file(dir.join("big/f0299.txt")).expect("rm");
        std::fs::remove_dir_all(dir.join("ab")).expect("rm -r");
        commit(dir, "delete a file at the end and a whole directory");
        std::fs::remove_file(dir.join("a0")).expect("rm");
        write(dir, "a0/inner.txt", "file became a directory\n");
        std::fs::remove_dir_all(dir.join("a")).expect("rm -r");
        write(dir, "a", "directory became a file\n");
        commit(dir, "type changes");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.join("z"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
            std::os::unix::fs::symlink("z", dir.join("link")).expect("symlink");
        }
        commit(dir, "mode change and a link");
        commit(dir, "empty");
        git(dir, &["checkout", "-q", "-b", "side", "HEAD~2"]);
        write(dir, "side/only.txt", "side\n");
        write(dir, "big/f0001.txt", "side change\n");
        commit(dir, "side");
        git(dir, &["checkout", "-q", "main"]);
        git(dir, &["merge", "-q", "--no-edit", "side"]);
        write(dir, "after/merge.txt", "x\n");
        commit(dir, "after the merge");

        let want = expected(dir, "main");
        assert!(want.iter().any(|(_, p)| p == "a0/inner.txt") && want.iter().any(|(_, p)| p == "big/f0150.txt"));
        // Loose objects: every commit's paths, in walk order per commit.
        assert_eq!(sorted(actual(dir, "main")), sorted(want.clone()));
        // Packed by git (newer objects as delta bases) and aggressively deltified.
        git(dir, &["repack", "-adfq", "--depth=50", "--window=250"]);
        assert_eq!(sorted(actual(dir, "main")), sorted(want.clone()));
    }

    #[test]
    fn changes_of_a_fast_import_pack_match_git() {
        // fast-import chains each tree on its previous version: the oldest-first order.
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        let mut stream = String::new();
        for i in 0..120 {
            stream.push_str(&format!(
                "commit refs/heads/main\nmark :{}\ncommitter T <t@example.com> {} +0000\ndata 2\nc\n",
                i + 1,
                1_700_000_000 + i
            ));
            for f in [format!("d/p{i}.txt"), format!("e/q{}.txt", i % 7)] {
                let body = format!("{i}\n");
                stream.push_str(&format!("M 100644 inline {f}\ndata {}\n{body}\n", body.len()));
            }
            if i % 10 == 9 {
                stream.push_str(&format!("D d/p{}.txt\n", i - 5));
            }
        }
        let mut child = Command::new("git")
            .current_dir(dir)
            .args(["fast-import", "--quiet"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("fast-import");
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(stream.as_bytes()).expect("feed");
        assert!(child.wait().expect("wait").success());
        let want = expected(dir, "main");
        let got = actual(dir, "main");
        assert_eq!(sorted(got.clone()), sorted(want));
        // Reported newest commit first, whatever order the diffs ran in.
        let tip = git(dir, &["rev-parse", "main"]);
        assert_eq!(got.first().map(|(c, _)| c.as_str()), Some(tip.trim()));
        // And the diffs did run oldest first, following the delta chains.
        let repo = gix::open(dir).expect("open");
        let id = |rev: &str| ObjectId::from_hex(git(dir, &["rev-parse", rev]).trim().as_bytes()).expect("an id");
        let pairs: Vec<(ObjectId, Option<ObjectId>)> = (0..100)
            .map(|n| (id(&format!("main~{n}^{{tree}}")), Some(id(&format!("main~{}^{{tree}}", n + 1)))))
            .collect();
        assert!(oldest_first(&repo, &pairs));
        // One thread: git's threads split the delta search at moments that vary from run to run, and
        // now and then leave an older tree as the base of a newer one.
        git(dir, &["-c", "pack.threads=1", "repack", "-adfq"]);
        let repo = gix::open(dir).expect("open");
        assert!(!oldest_first(&repo, &pairs));
        assert_eq!(sorted(actual(dir, "main")), sorted(expected(dir, "main")));
    }

    #[test]
    fn git_entry_order() {
        let e =
            |mode: &'static str, name: &'static str| Entry { mode: mode.as_bytes(), name: name.as_bytes(), oid: &[] };
        // A tree sorts as if its name ended in `/`.
        assert_eq!(e("40000", "a").cmp_git(&e("100644", "a.b")), Ordering::Greater);
        assert_eq!(e("100644", "a").cmp_git(&e("100644", "a.b")), Ordering::Less);
        assert_eq!(e("40000", "a").cmp_git(&e("100644", "a0")), Ordering::Less);
        assert_eq!(e("40000", "a").cmp_git(&e("100644", "a")), Ordering::Greater);
        assert_eq!(e("40000", "a").cmp_git(&e("40000", "a")), Ordering::Equal);
        assert_eq!(common_prefix(b"abcdef", b"abcxef"), 3);
        assert_eq!(common_suffix(b"abcdef", b"abcxef"), 2);
        assert_eq!(common_suffix(b"ef", b"abcxef"), 2);
        let long: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let mut other = long.clone();
        other[700] ^= 1;
        assert_eq!((common_prefix(&long, &other), common_suffix(&long, &other)), (700, 299));
    }
}
