//! Build settings that are not code.
//!
//! On Linux the `git-boulder` executable is linked at a fixed address (`-no-pie`), as Go links
//! its programs by default. git starts it for every commit (the post-commit hook); a
//! position-independent executable of this size makes the dynamic loader apply about 12,000
//! relocations at each start, writing some 50 pages of memory first: 0.1 to 0.3 ms of a hook
//! that costs about 3 ms in all (docs/benchmarks.md). The price is that the executable's own code
//! is not at a random address (address space layout randomisation still places its libraries,
//! stack and heap). `BOULDER_PIE=1 cargo build …` links a position-independent executable, as
//! does a static C runtime (`+crt-static`, musl).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BOULDER_PIE");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let linux = var("CARGO_CFG_TARGET_OS") == "linux";
    // A static C runtime (`+crt-static`, musl's default) makes a static position-independent
    // executable; `-no-pie` after rustc's `-static-pie` would leave one that crashes at start.
    let static_crt =
        var("CARGO_CFG_TARGET_FEATURE").split(',').any(|f| f == "crt-static") || var("CARGO_CFG_TARGET_ENV") == "musl";
    let pie = std::env::var("BOULDER_PIE").is_ok_and(|v| !v.is_empty() && v != "0");
    if linux && !static_crt && !pie {
        // The binary (and its unit tests) only: the library and the integration tests link as usual.
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
