//! Feeling like part of git: man pages from the clap definitions and shell completions that
//! work through `git boulder <TAB>`.

mod common;

use common::*;

#[test]
fn man_pages_install_for_every_command() {
    let repo = TestRepo::empty();
    let dir = repo.tmp.path().join("man");
    repo.boulder(&["man", "--install-dir", dir.to_str().unwrap()]).ok();
    for page in ["git-boulder.1", "git-boulder-stream-init.1", "git-boulder-prd-next.1", "git-boulder-hooks-install.1"]
    {
        let text = std::fs::read_to_string(dir.join("man1").join(page)).unwrap_or_else(|_| panic!("no {page}"));
        assert!(text.contains(".TH"), "{page} is not a man page");
    }
    assert!(
        std::fs::read_to_string(dir.join("man1/git-boulder-stream-init.1")).unwrap().contains("idempotent")
            || std::fs::read_to_string(dir.join("man1/git-boulder-stream-init.1")).unwrap().contains("Idempotent")
    );
    let page = repo.boulder(&["man"]).ok().stdout;
    assert!(page.starts_with(".ie") || page.contains(".TH git-boulder"), "{page}");
}

#[test]
fn bash_completion_through_git() {
    let repo = TestRepo::empty();
    let script = repo.boulder(&["completions", "bash"]).ok().stdout;
    assert!(script.contains("_git_boulder()"));
    let file = repo.tmp.path().join("c.bash");
    std::fs::write(&file, script).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(git boulder stream in); COMP_CWORD=3; _git_boulder; echo \"${{COMPREPLY[@]}}\"",
            file.display()
        ))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "init", "{}", String::from_utf8_lossy(&out.stderr));
    for shell in ["zsh", "fish"] {
        assert!(!repo.boulder(&["completions", shell]).ok().stdout.is_empty());
    }
    repo.boulder(&["completions", "tcsh"]).code(2);
}
