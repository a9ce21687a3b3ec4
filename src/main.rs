use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use git_boulder::cli::{self, Cli};

fn main() -> ExitCode {
    // BOULDER_TRUST stands for --trust for this command only: read, then out of the environment
    // every child inherits.
    git_boulder::context::take_env();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(outcome) = cli::run_hook_directly(&args) {
        return finish(outcome);
    }
    // Called by the completion scripts (`git boulder completions SHELL`) with the words typed:
    // print the candidates and exit.
    clap_complete::CompleteEnv::with_factory(Cli::command).var(cli::complete::ENV_VAR).complete();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    finish(cli::run(cli))
}

/// The exit code of a run, printing its error.
fn finish(outcome: git_boulder::Result<u8>) -> ExitCode {
    match outcome {
        Ok(code) => ExitCode::from(code),
        // Stdout closed by its reader (`git boulder status | head`): quiet, like git.
        Err(err) if err.is_broken_pipe() => ExitCode::SUCCESS,
        Err(err) => {
            // Messages quote titles, names and remote text: print them inert.
            // Written as std's `eprintln!` would, but a standard error closed early loses the
            // lines instead of ending in a panic.
            use std::io::Write as _;
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "error: {}", git_boulder::text::inert_lines(&err.message));
            // With `-v`, what lies below the message, one cause a line, outermost first.
            if git_boulder::context::current().trace {
                for cause in err.causes() {
                    let _ = writeln!(stderr, "caused by: {}", git_boulder::text::inert_lines(&cause));
                }
            }
            for hint in &err.hints {
                let _ = writeln!(stderr, "hint: {}", git_boulder::text::inert_lines(hint));
            }
            ExitCode::from(err.exit_code())
        }
    }
}
