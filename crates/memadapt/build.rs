//! The shared library gets a SONAME, `libmemadapt.so.<major>`, so that
//! programs linked against it name the ABI they were built for and a new
//! major version can be installed beside the old one (install.sh makes the
//! versioned file and its links). 0.x: every minor version may break the
//! ABI, so the soname carries 0 until 1.0 as semver says for 0.x crates'
//! users; bump it with any change to include/memadapt.h that breaks callers.
fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmemadapt.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
