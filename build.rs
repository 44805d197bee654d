//! Gathers the code a plain run of accel executes at the start of its text (on Linux), with
//! the linker script `link/hot-text.ld` that `tools/hot_text.py` writes: the kernel maps a
//! program 64 KiB around each page it faults in, so scattered code costs resident memory
//! (3.6 MiB for a run that gathered code does in 2.6). A stale list costs memory, never
//! correctness. `ACCEL_HOT_TEXT=0` links without it, for a linker that takes no `INSERT`
//! script (GNU ld and LLD do; mold does not).

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=link/hot-text.ld");
    println!("cargo:rerun-if-env-changed=ACCEL_HOT_TEXT");
    let linux = env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let wanted = env::var("ACCEL_HOT_TEXT").map_or(true, |v| v != "0");
    if linux && wanted {
        let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        let script = Path::new(&dir).join("link/hot-text.ld");
        // Absent only while tools/hot_text.py makes the first one.
        if !script.exists() {
            return;
        }
        println!("cargo:rustc-link-arg-bin=accel=-Wl,-T,{}", script.display());
    }
}
