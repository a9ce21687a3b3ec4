//! Feeling like part of git: man pages from the clap definitions and shell completions that
//! work through `git boulder <TAB>`.

use crate::common::*;

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

/// Long operations show a progress line on a terminal and nothing when piped or under --quiet.
#[test]
fn progress_only_on_a_terminal() {
    let repo = sample();
    // Under a pseudo-terminal (python's pty), stream init of three streams shows [n/3] lines.
    let script = format!(
        "import os, pty, sys\nos.chdir({:?})\nout = b''\ndef read(fd):\n    global out\n    data = os.read(fd, 4096)\n    out += data\n    return data\npty.spawn([{:?}, 'stream', 'init'], read)\nsys.stdout.write(repr(out))\n",
        repo.dir.to_str().unwrap(),
        bin()
    );
    let mut cmd = repo.command("python3");
    let out = cmd.arg("-c").arg(script).output().unwrap();
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(tty.contains("[1/3] auth") && tty.contains("\\x1b[2K"), "{tty}\n{}", String::from_utf8_lossy(&out.stderr));
    // Piped: no progress, no escape codes.
    let r = repo.boulder(&["stream", "cleanup", "--all", "--force"]).ok();
    let r2 = repo.boulder(&["stream", "init"]).ok();
    for text in [&r.stderr, &r2.stderr, &r2.stdout] {
        assert!(!text.contains('\x1b') && !text.contains("[1/3]"), "{text}");
    }
    // -v traces each step with its time instead.
    let r = repo.boulder(&["-v", "status"]).ok();
    assert!(r.stderr.contains("trace:") && r.stderr.contains("ms"), "{}", r.stderr);
}
