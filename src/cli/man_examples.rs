//! The EXAMPLES and EXIT STATUS sections of the man pages, per page (`git-boulder-stream-init`).
//! Exit codes follow DESIGN §6: 0 done, 1 refused, 2 usage or configuration, 3 internal.

/// (command line, what it does) pairs; empty when the page has none written (the usage is shown).
///
/// Long by design: one table of text, an arm per man page, read top to bottom like the pages
/// themselves; splitting it would scatter the examples without adding logic to follow.
pub fn examples(page: &str) -> &'static [(&'static str, &'static str)] {
    match page {
        "git-boulder" => &[
            ("git boulder stream suggest --write", "Propose a stream plan from the PRD and save it."),
            (
                "git boulder stream init && git boulder hooks install",
                "Give every stream its branch and worktree, and record commits.",
            ),
            ("git boulder status", "The dashboard: every stream's status, progress and last activity."),
            ("git boulder stream merge auth", "Merge a finished stream back after a conflict check."),
        ],
        "git-boulder-stream" => &[
            ("git boulder stream validate", "Check the plan against the PRD and the tree."),
            ("cd \"$(git boulder stream path auth)\"", "Go to a stream's worktree."),
        ],
        "git-boulder-stream-suggest" => &[
            ("git boulder stream suggest", "Print a proposed .boulder/streams.yaml."),
            ("git boulder stream suggest --write --prd docs/prd.json", "Save a proposal made from another PRD."),
        ],
        "git-boulder-stream-add" => &[(
            "git boulder stream add hotfix --story US-007 US-008 --path 'src/payments/**'",
            "Add a stream for ad-hoc work, keeping the plan's comments and order.",
        )],
        "git-boulder-stream-validate" => &[
            ("git boulder stream validate", "Name every problem of the plan, with a hint each."),
            ("git boulder stream validate --json | jq '.findings[].code'", "The finding codes, for scripts."),
        ],
        "git-boulder-stream-init" => &[
            ("git boulder stream init", "A branch boulder/NAME and a worktree for every stream."),
            ("git boulder stream init auth api", "Only these two streams."),
        ],
        "git-boulder-stream-path" => &[("cd \"$(git boulder stream path auth)\"", "Go to the auth stream's worktree.")],
        "git-boulder-stream-cleanup" => &[
            (
                "git boulder stream cleanup --merged --delete-branch",
                "Remove the worktrees and branches of merged streams.",
            ),
            ("git boulder stream cleanup --stale", "Forget streams whose worktree folder git no longer knows."),
        ],
        "git-boulder-stream-run" => &[
            (
                "git boulder stream run auth -- claude -p \"$BOULDER_PROMPT\"",
                "Run an agent on auth's stories until they are done.",
            ),
            (
                "git boulder stream run docs --max-iterations 3",
                "Run the stream's configured agent three times at most.",
            ),
        ],
        "git-boulder-stream-stop" => {
            &[("git boulder stream stop auth", "Ask auth's loop to stop after its current iteration.")]
        }
        "git-boulder-stream-merge" => &[
            ("git boulder stream merge auth --dry-run", "What merging would do: commits, conflict check, PRD diff."),
            ("git boulder stream merge --all", "Merge every complete stream in depends_on order."),
            ("git boulder stream merge api --wait", "Wait for another merge to finish first."),
            (
                "git boulder stream merge auth --remote origin",
                "Land auth on origin's base through the merge queue; the local base follows.",
            ),
        ],
        "git-boulder-stream-rollback" => &[
            ("git boulder stream rollback auth", "Move auth's branch back to where it forked from the base."),
            ("git boulder stream rollback auth --to HEAD~2", "Drop its last two commits (kept in a backup ref)."),
            ("git boulder stream rollback auth --restore", "Bring the latest backup back."),
        ],
        "git-boulder-stream-unmerge" => &[
            ("git boulder stream unmerge auth", "Revert what auth brought into the base; reopen its stories."),
            ("git boulder stream unmerge auth --remote origin", "The same on origin's base, through the merge queue."),
        ],
        "git-boulder-stream-retry" => &[
            ("git boulder stream retry auth", "Let workers take auth again once its refused landing is dealt with."),
            ("git boulder stream retry auth --remote origin", "The same, shared through origin."),
        ],
        "git-boulder-stream-claim" => {
            &[("git boulder stream claim auth --ttl 2h", "Lease auth on the remote for two hours.")]
        }
        "git-boulder-stream-release" => &[("git boulder stream release auth", "Give the lease back.")],
        "git-boulder-status" | "git-boulder-stream-status" | "git-boulder-stream-list" => &[
            ("git boulder status", "The table of streams."),
            ("git boulder status --json", "The same as JSON (docs/schemas/status.schema.json)."),
            ("git boulder status --watch", "A live dashboard with claims and queue positions; q quits."),
        ],
        "git-boulder-work" => &[
            (
                "git boulder work --remote origin",
                "Claim, run and land ready streams through origin, one after another.",
            ),
            ("git boulder work --parallel 2 -- my-agent --flag", "Two streams at once on this machine, local merges."),
        ],
        "git-boulder-prd" | "git-boulder-prd-show" => &[
            ("git boulder prd show", "Every story with its status."),
            ("git boulder prd show --stream auth --json", "The auth stream's stories as JSON."),
        ],
        "git-boulder-prd-next" => {
            &[("git boulder prd next --stream auth", "The next open story of auth, with its text.")]
        }
        "git-boulder-prd-done" => {
            &[("git boulder prd done US-001 US-002", "Record two stories as done without editing the PRD.")]
        }
        "git-boulder-log" => &[
            ("git boulder log auth", "The op history of the auth stream."),
            ("git boulder log prd --json", "The story completion records as JSON."),
        ],
        "git-boulder-hooks" | "git-boulder-hooks-install" => &[
            ("git boulder hooks install", "Install the hook shims (an existing hook keeps running first)."),
            ("git boulder hooks status", "Which hooks are installed."),
        ],
        "git-boulder-push" | "git-boulder-pull" | "git-boulder-sync" => &[
            ("git boulder sync", "Pull the default remote's state, merge it, push ours."),
            ("git boulder push origin", "Send the state to origin."),
        ],
        "git-boulder-remote" | "git-boulder-remote-setup" => {
            &[("git boulder remote setup origin", "Fetch and push git-boulder's refs with origin.")]
        }
        "git-boulder-doctor" => &[("git boulder doctor", "Find what is out of step and how to fix each.")],
        "git-boulder-spend" => &[
            ("git boulder spend", "Tokens, cost, agent time and runs per stream, against each budget."),
            ("git boulder spend --by model --since 7d", "What each model cost this past week."),
            ("git boulder pull origin && git boulder spend --json", "Every machine's figures, as JSON."),
        ],
        "git-boulder-spend-add" => &[(
            "git boulder spend add --stream auth --tokens-in 12000 --tokens-out 3400 --model gpt-5 --id run-42",
            "Record what another agent spent, once.",
        )],
        "git-boulder-spend-reset" => {
            &[("git boulder spend reset auth", "Start auth's budget again from nothing (a spent stream resumes).")]
        }
        "git-boulder-gc" => &[
            ("git boulder gc", "Pack every loose object of the state refs into one pack."),
            ("git boulder gc --auto", "The same, only past the loose-object threshold (as pull and push do)."),
        ],
        "git-boulder-record" => &[
            ("git boulder record", "Record this stream's commits made without the hooks, each once."),
            ("git boulder record --stream auth", "The same for the auth stream, from anywhere in the repository."),
            ("git boulder record HEAD~3..HEAD", "Record these commits (those already recorded are left alone)."),
        ],
        "git-boulder-man" => &[(
            "git boulder man --install-dir ~/.local/share/man",
            "Install every page; then `git boulder --help` opens them.",
        )],
        "git-boulder-completions" => &[
            (
                "source <(git boulder completions bash)",
                "Complete commands, stream names, boulder ids and story ids in bash.",
            ),
            ("git boulder completions fish > ~/.config/fish/completions/git-boulder.fish", "The same for fish."),
        ],
        "git-boulder-demo" => &[("git boulder demo | less", "The whole flow on a sample project, narrated.")],
        "git-boulder-create" => &[("git boulder create oauth --parent auth", "A boulder under the auth boulder.")],
        "git-boulder-switch" => &[("git boulder switch oauth", "This worktree's commits count for oauth from now on.")],
        "git-boulder-check" => &[("git boulder check --json", "Whether to push the agent on, for a stop hook.")],
        "git-boulder-checkpoint" => {
            &[("git boulder checkpoint -m \"login form done, tests next\"", "Record where work stands.")]
        }
        "git-boulder-resume" => &[("git boulder resume", "Everything the next session needs.")],
        "git-boulder-agent-install" => &[
            ("git boulder agent install claude", "Claude Code runs git-boulder's hooks in every worktree, untracked."),
            ("git boulder agent install codex --commit", "The Codex hook in the tracked .codex/hooks.json, committed."),
        ],
        "git-boulder-agent-uninstall" => {
            &[("git boulder agent uninstall opencode", "Every file back as it was before the install.")]
        }
        "git-boulder-agent-status" => {
            &[("git boulder agent status", "Per harness and worktree: present, modified, missing or stale.")]
        }
        _ => &[],
    }
}

/// (code, meaning) for the page.
pub fn exit_status(page: &str) -> Vec<(&'static str, String)> {
    let mut out = vec![("0", "Success.".to_string())];
    let refused = match page {
        "git-boulder-stream-merge" => "Refused: conflicts (a table names them), stories not done, depends_on not merged, or uncommitted changes, or (with --remote) the remote refused the push or kept moving; nothing was changed.",
        "git-boulder-stream-rollback" => "Refused: REV is not in the branch's history, no backup to restore, or uncommitted changes in the worktree; nothing was changed.",
        "git-boulder-stream-unmerge" => "Refused: the stream is not merged, the revert conflicts with later commits (a table names them), or uncommitted changes; nothing was changed.",
        "git-boulder-stream-run" | "git-boulder-stream-init" | "git-boulder-stream-cleanup" => {
            "Refused: the stream's lock is held by another git-boulder process, or work would be lost (cleanup)."
        }
        "git-boulder-stream-claim" => "Refused: another machine holds the lease.",
        "git-boulder-stream-retry" => "Refused: the remote did not take the state pushed (`git boulder sync REMOTE` shares it).",
        "git-boulder-work" => "Some stream was not merged: it failed, stopped, needs attention (a refused landing), stays blocked, or Ctrl-C ended the run (the summary says which).",
        "git-boulder-doctor" => "Something needs fixing (each finding says how).",
        "git-boulder-push" | "git-boulder-pull" | "git-boulder-sync" => "Refused by the remote, or a ref failed validation.",
        "git-boulder-stream-add" => "Refused: the plan already has a stream of that name.",
        _ => "Refused: the operation would break a rule (the message says which and how to proceed).",
    };
    out.push(("1", refused.to_string()));
    let usage = match page {
        "git-boulder-stream-validate" => "The plan has errors, or bad arguments.",
        "git-boulder-record" => {
            "Bad arguments: a range that names commits of no stream (they are named), an unknown stream."
        }
        _ => "Bad arguments or configuration: no repository, an unreadable plan or PRD, an unknown name.",
    };
    out.push(("2", usage.to_string()));
    out.push(("3", "An internal error (a bug or an unexpected I/O failure).".to_string()));
    out
}
