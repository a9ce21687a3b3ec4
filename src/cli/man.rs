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

/// Every command and subcommand, with its man page name (`git-boulder-stream-init`). Hidden
/// commands and clap's `help` subcommand get no page, so no page lists them either.
fn pages() -> Vec<(String, clap::Command)> {
    fn walk(cmd: &clap::Command, name: &str, out: &mut Vec<(String, clap::Command)>) {
        let page = cmd.clone().name(name.to_string()).bin_name(name.replace('-', " "));
        out.push((name.to_string(), page));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            walk(sub, &format!("{name}-{}", sub.get_name()), out);
        }
    }
    fn no_help(cmd: clap::Command) -> clap::Command {
        let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
        let mut cmd = cmd.disable_help_subcommand(true);
        for n in names {
            cmd = cmd.mut_subcommand(n, no_help);
        }
        cmd
    }
    let mut root = no_help(super::Cli::command());
    root.build();
    let mut out = Vec::new();
    walk(&root, "git-boulder", &mut out);
    out
}

/// Text for roff: backslashes and hyphens escaped, a leading `.` or `'` made literal.
fn roff_text(s: &str) -> String {
    let t = s.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with(['.', '\'']) {
        format!("\\&{t}")
    } else {
        t
    }
}

/// The EXAMPLES and EXIT STATUS sections of page `name`.
fn extra_sections(name: &str, cmd: &clap::Command) -> String {
    let mut out = String::from(".SH EXAMPLES\n");
    let examples = super::man_examples::examples(name);
    let generated;
    let examples = if examples.is_empty() {
        // A command without written examples shows its usage with the required arguments.
        let words: Vec<String> = cmd
            .get_positionals()
            .filter(|a| a.is_required_set())
            .map(|a| {
                a.get_value_names()
                    .and_then(|v| v.first())
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| a.get_id().to_string().to_uppercase())
            })
            .collect();
        let line = format!("{} {}", name.replacen("git-boulder", "git boulder", 1).replace('-', " "), words.join(" "));
        let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
        generated = vec![(line.trim_end().to_string(), about)];
        generated.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect::<Vec<_>>()
    } else {
        examples.to_vec()
    };
    for (command, what) in examples {
        out.push_str(".PP\n");
        out.push_str(&format!("{}\n", roff_text(what)));
        out.push_str(".PP\n.RS 4\n.nf\n");
        out.push_str(&format!("$ {}\n", roff_text(command)));
        out.push_str(".fi\n.RE\n");
    }
    out.push_str(".SH \"EXIT STATUS\"\n");
    for (code, what) in super::man_examples::exit_status(name) {
        out.push_str(&format!(".TP\n\\fB{code}\\fR\n{}\n", roff_text(&what)));
    }
    out
}

/// The page of `name`: clap_mangen's NAME, SYNOPSIS, DESCRIPTION, OPTIONS and SUBCOMMANDS, then
/// EXAMPLES and EXIT STATUS, then VERSION.
fn render(name: &str, cmd: clap::Command) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .map_err(|e| Error::internal(format!("man page: {e}")).with_source(e))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let extra = extra_sections(name, &cmd);
    let text = match text.find(".SH VERSION") {
        Some(at) => format!("{}{extra}{}", &text[..at], &text[at..]),
        None => format!("{text}{extra}"),
    };
    Ok(text.into_bytes())
}

pub fn man(args: ManArgs) -> Result<()> {
    match args.install_dir {
        None => {
            let (name, root) = pages().into_iter().next().expect("the root page");
            std::io::stdout().lock().write_all(&render(&name, root)?)?;
        }
        Some(dir) => {
            let man1 = dir.join("man1");
            std::fs::create_dir_all(&man1)
                .map_err(|e| Error::usage(format!("cannot create {}: {e}", man1.display())).with_source(e))?;
            let all = pages();
            for (name, cmd) in &all {
                crate::fsutil::write_atomic(&man1.join(format!("{name}.1")), &render(name, cmd.clone())?)?;
            }
            eprintln!("wrote {} man pages to {}", all.len(), man1.display());
            eprintln!("make sure {} is on your MANPATH; then `git boulder --help` opens them", dir.display());
        }
    }
    Ok(())
}

/// Print the completion script for a shell: it registers git-boulder with the shell's completion
/// and, at each `<TAB>`, asks this binary (clap_complete's dynamic engine, see
/// [`super::complete`]) for candidates, so stream names, boulder ids and story ids come from the
/// repository. Subcommands come before flags; the internal `hook` command is not offered.
pub fn completions(args: CompletionsArgs) -> Result<()> {
    use clap_complete::env::EnvCompleter;
    use clap_complete::Shell;
    // The script calls this very binary, wherever it is installed.
    let exe = std::env::current_exe()
        .map_err(|e| Error::internal(format!("cannot find the git-boulder binary: {e}")).with_source(e))?;
    let exe = exe.to_string_lossy();
    let shell: &dyn EnvCompleter = match args.shell {
        Shell::Bash => &clap_complete::env::Bash,
        Shell::Zsh => &clap_complete::env::Zsh,
        Shell::Fish => &clap_complete::env::Fish,
        Shell::Elvish => &clap_complete::env::Elvish,
        Shell::PowerShell => &clap_complete::env::Powershell,
        other => {
            return Err(
                Error::usage(format!("no completions for {other}")).hint("use bash, zsh, fish, elvish or powershell")
            )
        }
    };
    let mut out = std::io::stdout().lock();
    shell.write_registration(super::complete::ENV_VAR, "git-boulder", "git-boulder", &exe, &mut out)?;
    if args.shell == Shell::Bash {
        // git's own completion calls _git_boulder for `git boulder <TAB>` (after `git -C DIR`
        // too: __git_cmd_idx is where `boulder` sits).
        let quoted = format!("'{}'", exe.replace('\'', "'\\''"));
        writeln!(
            out,
            r#"
_git_boulder() {{
    local IFS=$'\013'
    local i=${{__git_cmd_idx:-1}}
    local words=(git-boulder "${{COMP_WORDS[@]:i+1}}")
    COMPREPLY=( $( \
        _CLAP_IFS="$IFS" \
        _CLAP_COMPLETE_INDEX="$((COMP_CWORD - i))" \
        _CLAP_COMPLETE_SPACE=true \
        {var}="bash" \
        {quoted} -- "${{words[@]}}" \
    ) )
    [[ $? == 0 ]] || unset COMPREPLY
}}"#,
            var = super::complete::ENV_VAR
        )?;
    }
    Ok(())
}
