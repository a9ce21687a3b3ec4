//! `git boulder man` and `git boulder completions`: man pages generated from the clap
//! definitions (so `git boulder --help` can be answered by `man git-boulder`), and shell
//! completions for bash, zsh and fish.

use std::io::Write;
use std::path::PathBuf;

use clap::CommandFactory;

use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write the pages into DIR/man1 (e.g. ~/.local/share/man); without it, print git-boulder(1).
    #[arg(long, value_name = "DIR")]
    pub install_dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// Every command and subcommand, with its man page name (`git-boulder-stream-init`).
fn pages() -> Vec<(String, clap::Command)> {
    fn walk(cmd: &clap::Command, name: &str, out: &mut Vec<(String, clap::Command)>) {
        let page = cmd.clone().name(name.to_string()).bin_name(name.replace('-', " "));
        out.push((name.to_string(), page));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            walk(sub, &format!("{name}-{}", sub.get_name()), out);
        }
    }
    let mut root = super::Cli::command();
    root.build();
    let mut out = Vec::new();
    walk(&root, "git-boulder", &mut out);
    out
}

pub fn man(args: ManArgs) -> Result<()> {
    let render = |cmd: clap::Command| -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut buf).map_err(|e| Error::internal(format!("man page: {e}")))?;
        Ok(buf)
    };
    match args.install_dir {
        None => {
            let (_, root) = pages().into_iter().next().expect("the root page");
            std::io::stdout().lock().write_all(&render(root)?)?;
        }
        Some(dir) => {
            let man1 = dir.join("man1");
            std::fs::create_dir_all(&man1)
                .map_err(|e| Error::usage(format!("cannot create {}: {e}", man1.display())))?;
            let all = pages();
            for (name, cmd) in &all {
                crate::fsutil::write_atomic(&man1.join(format!("{name}.1")), &render(cmd.clone())?)?;
            }
            eprintln!("wrote {} man pages to {}", all.len(), man1.display());
            eprintln!("make sure {} is on your MANPATH; then `git boulder --help` opens them", dir.display());
        }
    }
    Ok(())
}

pub fn completions(args: CompletionsArgs) -> Result<()> {
    let mut cmd = super::Cli::command().bin_name("git-boulder");
    let mut out = std::io::stdout().lock();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "git-boulder", &mut script);
    let mut script = String::from_utf8_lossy(&script).into_owned();
    if args.shell == clap_complete::Shell::Bash {
        // clap_complete spells the hyphenated name two ways in its bash case labels; unify them.
        script = script.replace("git__subcmd__boulder", "git__boulder");
    }
    out.write_all(script.as_bytes())?;
    if args.shell == clap_complete::Shell::Bash {
        // git's own completion calls _git_boulder for `git boulder <TAB>`.
        writeln!(
            out,
            "\n_git_boulder() {{\n  COMP_WORDS=(git-boulder \"${{COMP_WORDS[@]:2}}\")\n  COMP_CWORD=$((COMP_CWORD - 1))\n  _git__boulder git-boulder \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n}}"
        )?;
    }
    Ok(())
}
