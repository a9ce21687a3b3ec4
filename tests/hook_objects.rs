//! The objects the post-commit hook writes (an op's blobs, tree and commit; the note's blob,
//! notes tree and commit): loose objects git reads and `git fsck --strict` accepts, written as
//! stored zlib streams (as git writes with `core.looseCompression=0`), none left half-written.

use crate::common::*;

/// The loose object file of `id` in `repo`, if the object is loose.
fn loose_file(repo: &TestRepo, id: &str) -> Option<Vec<u8>> {
    std::fs::read(repo.dir.join(".git/objects").join(&id[..2]).join(&id[2..])).ok()
}

#[test]
fn hook_objects_are_stored_loose_objects_git_reads() {
    let repo = sample();
    repo.boulder(&["hooks", "install"]).ok();
    repo.boulder(&["stream", "init", "auth"]).ok();
    let wt = repo.worktree("auth");
    for i in 0..3 {
        commit_in(&repo, &wt, "src/auth/login.rs", format!("// login {i}\n"), &format!("login {i}"));
    }
    let head = repo.git_in(&wt, &["rev-parse", "HEAD"]).ok().stdout.trim().to_string();

    // The note, through plain git.
    let note = repo.git(&["notes", "--ref", "boulder", "show", &head]).ok().stdout;
    let note: serde_json::Value = serde_json::from_str(note.trim()).unwrap();
    assert_eq!(note["stream"], "auth");
    assert_eq!(note["iteration"], 3);

    // Every object of the last op and of the last notes commit, read back by git, is a stored
    // zlib stream: header 78 01, then one final stored block (first byte 1).
    let op = repo.git_out(&["rev-parse", "refs/boulder/boulders/auth"]);
    let notes = repo.git_out(&["rev-parse", "refs/notes/boulder"]);
    let note_blob = repo.git_out(&["rev-parse", &format!("refs/notes/boulder:{head}")]);
    let mut ids =
        vec![op.clone(), notes.clone(), note_blob, repo.git_out(&["rev-parse", &format!("{notes}^{{tree}}")])];
    let op_tree = repo.git_out(&["rev-parse", &format!("{op}^{{tree}}")]);
    ids.push(repo.git_out(&["rev-parse", &format!("{op_tree}:op.json")]));
    ids.push(repo.git_out(&["rev-parse", &format!("{op_tree}:state.json")]));
    ids.push(op_tree);
    for id in &ids {
        let bytes = loose_file(&repo, id).unwrap_or_else(|| panic!("{id} is not a loose object"));
        assert_eq!(&bytes[..3], &[0x78, 0x01, 0x01], "{id}: not one stored block");
        repo.git(&["cat-file", "-e", id]).ok();
    }
    let state: serde_json::Value =
        serde_json::from_str(&repo.git_out(&["cat-file", "-p", &format!("{op}:state.json")])).unwrap();
    assert_eq!(state["iteration"], 3);

    // Nothing half-written is left in the object folders.
    for entry in std::fs::read_dir(repo.dir.join(".git/objects")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            for f in std::fs::read_dir(entry.path()).unwrap() {
                let name = f.unwrap().file_name().to_string_lossy().into_owned();
                assert!(!name.starts_with("tmp_obj_"), "left behind: {name}");
            }
        }
    }
    repo.assert_fsck();
}
