// Links the C++ library through pkg-config's ringcast-c (set PKG_CONFIG_PATH
// for a build tree: tests/bindings does), and writes the C compiler's view
// of the C ABI's layout (abi/c_layout.c) for tests/abi.rs.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn pkg_config(flag: &str) -> Vec<String> {
    let out = Command::new("pkg-config").args([flag, "ringcast-c"]).output().expect("running pkg-config");
    if !out.status.success() {
        panic!(
            "pkg-config {} ringcast-c: {} (install ringcast, or set PKG_CONFIG_PATH)",
            flag,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).unwrap().split_whitespace().map(str::to_owned).collect()
}

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=abi/c_layout.c");
    for flag in pkg_config("--libs") {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={}", lib);
        } // -pthread: Rust's std links the thread library already
    }
    let cflags = pkg_config("--cflags");
    for flag in &cflags {
        if let Some(dir) = flag.strip_prefix("-I") {
            println!("cargo:rerun-if-changed={}/ringcast/ringcast.h", dir);
            println!("cargo:rustc-env=RINGCAST_HEADER={}/ringcast/ringcast.h", dir);
        }
    }
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let program = out.join("c_layout");
    let status = Command::new(env::var("CC").unwrap_or_else(|_| "cc".to_owned()))
        .args(["-std=c11", "-o"])
        .arg(&program)
        .arg("abi/c_layout.c")
        .args(&cflags)
        .status()
        .expect("running the C compiler");
    assert!(status.success(), "compiling abi/c_layout.c");
    let layout = Command::new(&program).output().expect("running c_layout");
    assert!(layout.status.success(), "c_layout failed");
    std::fs::write(out.join("c_layout.rs"), layout.stdout).unwrap();
}
