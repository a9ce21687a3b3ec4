//! `git boulder log` prints its first lines at once: it reads a few ops ahead for the order by
//! time, not thousands, so a long op-log's first line does not wait for the rest, a log broken
//! deep down prints its newest ops before the error, and the first lines keep the order by time
//! when clocks disagree a little.

use std::io::Write;

use crate::common::TestRepo;

/// Write ops `1..=n` onto `refs/boulder/prd` with `git fast-import`: op `i` done at `at(i)`
/// seconds since the epoch; `broken` names an op whose `op.json` does not parse.
fn write_ops(repo: &TestRepo, n: u64, at: impl Fn(u64) -> i64, broken: Option<u64>) {
    let mut stream = Vec::new();
    for i in 1..=n {
        let at = jiff::Timestamp::from_second(at(i)).unwrap().to_string();
        let op = if broken == Some(i) {
            "not json\n".to_string()
        } else {
            format!(
                "{{\"v\": 1, \"kind\": \"done\", \"lamport\": {i}, \"at\": \"{at}\", \"actor\": \"far\", \"data\": {{\"ids\": [\"US-{i:04}\"]}}}}\n"
            )
        };
        let state = format!("{{\"done\": [], \"updated_at\": \"{at}\", \"lamport\": {i}}}\n");
        let msg = "boulder: done\n";
        write!(
            stream,
            "commit refs/boulder/prd\ncommitter git-boulder <git-boulder@localhost> {} +0000\n",
            1_700_000_000 + i
        )
        .unwrap();
        write!(stream, "data {}\n{msg}", msg.len()).unwrap();
        stream.extend_from_slice(b"deleteall\n");
        write!(stream, "M 100644 inline op.json\ndata {}\n{op}\n", op.len()).unwrap();
        write!(stream, "M 100644 inline state.json\ndata {}\n{state}\n", state.len()).unwrap();
    }
    stream.extend_from_slice(b"done\n");
    repo.fast_import(&stream);
}

/// The op number of each line `log` printed (its commit looked up in the history, which
/// `git rev-list` lists newest first: op `n` first).
fn printed_ops(repo: &TestRepo, n: u64, stdout: &str) -> Vec<u64> {
    let ids: Vec<String> = repo.git_out(&["rev-list", "refs/boulder/prd"]).lines().map(str::to_owned).collect();
    assert_eq!(ids.len() as u64, n);
    stdout
        .lines()
        .map(|l| {
            let prefix = l.split_whitespace().next().unwrap_or_default();
            let k = ids.iter().position(|id| id.starts_with(prefix)).unwrap_or_else(|| panic!("unknown line {l:?}"));
            n - k as u64
        })
        .collect()
}

#[test]
fn the_first_line_of_a_long_log_comes_after_reading_a_few_ops() {
    let repo = TestRepo::with_files(&[("README.md", "hello\n")]);
    let n = 5000;
    write_ops(&repo, n, |i| 1_700_000_000 + i as i64, None);
    let run = repo.boulder_env(&repo.dir, &["log", "prd"], &[("BOULDER_TRACE", "1")]).ok();
    let read: usize = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("trace: log: the first line after ")?.strip_suffix(" ops read")?.parse().ok())
        .unwrap_or_else(|| panic!("no trace of the first line in {}", run.stderr));
    assert!(read <= 64, "the first line waited for {read} ops of {n}");
    // Every op all the same, newest first.
    let ops = printed_ops(&repo, n, &run.stdout);
    assert_eq!(ops, (1..=n).rev().collect::<Vec<_>>());
    let json = repo.boulder_env(&repo.dir, &["log", "prd", "--json"], &[("BOULDER_TRACE", "1")]).ok();
    assert!(json.stderr.contains(&format!("trace: log: the first line after {read} ops read")), "{}", json.stderr);
    assert_eq!(json.json().as_array().unwrap().len() as u64, n);
}

#[test]
fn a_log_broken_deep_down_prints_its_newest_ops_before_the_error() {
    let repo = TestRepo::with_files(&[("README.md", "hello\n")]);
    let n = 1000;
    // Op 500 (the 501st line from the top) does not parse.
    write_ops(&repo, n, |i| 1_700_000_000 + i as i64, Some(500));
    let broken = repo.git_out(&["rev-parse", "refs/boulder/prd~500"]);
    let run = repo.boulder(&["log", "prd"]).code(2);
    assert!(run.stderr.contains(&broken), "the error names the broken op's commit: {}", run.stderr);
    let ops = printed_ops(&repo, n, &run.stdout);
    assert!(!ops.is_empty(), "the newest ops are printed before the error");
    assert!(ops.len() < 500, "not past the broken op: {} lines", ops.len());
    assert_eq!(ops, (n + 1 - ops.len() as u64..=n).rev().collect::<Vec<_>>(), "the newest first, none skipped");
}

#[test]
fn the_first_lines_keep_the_order_by_time_when_clocks_disagree_a_little() {
    let repo = TestRepo::with_files(&[("README.md", "hello\n")]);
    let n = 300;
    // The newest 10 ops come from a machine whose clock is 41 s behind: each belongs about twenty
    // places lower (times two seconds apart, theirs odd: no equal times).
    let at = |i: u64| 1_700_000_000 + 2 * i as i64 - if i > n - 10 { 41 } else { 0 };
    write_ops(&repo, n, at, None);
    let mut want: Vec<u64> = (1..=n).collect();
    want.sort_by_key(|i| std::cmp::Reverse(at(*i)));
    assert_eq!(&want[..12], &[290, 289, 288, 287, 286, 285, 284, 283, 282, 281, 280, 300]);
    let run = repo.boulder(&["log", "prd"]).ok();
    assert_eq!(printed_ops(&repo, n, &run.stdout), want, "sorted by time, newest first");
    let first = repo.boulder(&["log", "prd", "-n", "12"]).ok();
    assert_eq!(printed_ops(&repo, n, &first.stdout), &want[..12]);
}

#[test]
fn log_n_gives_the_newest_ops_even_when_many_are_read_late() {
    let repo = TestRepo::with_files(&[("README.md", "hello\n")]);
    let n = 300;
    // The newest 100 ops from a machine a day behind: by time they belong below the other 200,
    // read 100 places before their place (more than the 64 read ahead for the first lines).
    let at = |i: u64| 1_700_000_000 + i as i64 - if i > 200 { 86_400 } else { 0 };
    write_ops(&repo, n, at, None);
    let first = repo.boulder(&["log", "prd", "-n", "3"]).ok();
    assert_eq!(printed_ops(&repo, n, &first.stdout), vec![200, 199, 198]);
}
