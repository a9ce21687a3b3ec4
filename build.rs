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
//!
//! With glibc, the unwinder (what a panic and a backtrace use) is linked in from gcc's
//! `libgcc_eh.a`, as Rust links it for a static C runtime, instead of loading `libgcc_s.so.1` at
//! each start: one shared library less to map and relocate, and its start-up code asks the
//! processor about itself with `cpuid`, which traps to the hypervisor on a virtual machine
//! (measured: 0.14 ms of each start). Where the C compiler has no `libgcc_eh.a`, or with
//! `BOULDER_SHARED_LIBGCC=1`, `libgcc_s` is loaded as usual.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BOULDER_PIE");
    println!("cargo:rerun-if-env-changed=BOULDER_SHARED_LIBGCC");
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
    let shared_libgcc = std::env::var("BOULDER_SHARED_LIBGCC").is_ok_and(|v| !v.is_empty() && v != "0");
    let native = var("HOST") == var("TARGET");
    if linux && var("CARGO_CFG_TARGET_ENV") == "gnu" && !static_crt && !shared_libgcc && native {
        if let Some(dir) = libgcc_eh_dir() {
            // A library of the package, so that it comes before std's `-lgcc_s` on the link line:
            // the unwinder's symbols are then found here, and `--as-needed` drops `libgcc_s`.
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
        }
    }
}

/// The folder of the C compiler's `libgcc_eh.a` (`cc -print-file-name`), if it has one.
fn libgcc_eh_dir() -> Option<std::path::PathBuf> {
    let out = std::process::Command::new("cc").arg("-print-file-name=libgcc_eh.a").output().ok()?;
    let path = std::path::PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // Without one, the compiler prints the name back as given.
    (out.status.success() && path.is_absolute() && path.is_file()).then(|| path.parent().map(Into::into))?
}
