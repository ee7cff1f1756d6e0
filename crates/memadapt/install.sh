#!/bin/sh
# Builds memadapt in release mode and installs the C interface under PREFIX:
#   PREFIX/lib/libmemadapt.so.VERSION with the links libmemadapt.so.MAJOR
#   (its SONAME, what programs load) and libmemadapt.so (what -lmemadapt
#   finds), PREFIX/lib/libmemadapt.a,
#   PREFIX/include/memadapt.h, PREFIX/lib/pkgconfig/memadapt.pc
# Usage: crates/memadapt/install.sh PREFIX      (e.g. $HOME/.local)
# Then: PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs memadapt
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 PREFIX   (installs lib/, include/ and lib/pkgconfig/ under PREFIX)" >&2
    exit 64
fi
mkdir -p "$1"
# Absolute, because the .pc file and -rpath flags built from it must not
# depend on the directory the user compiles in.
prefix=$(cd "$1" && pwd)
crate=$(cd "$(dirname "$0")" && pwd)

cd "$crate"
cargo build --release -p memadapt
# cargo knows the target directory (CARGO_TARGET_DIR, .cargo/config).
target=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
version=$(cargo pkgid -p memadapt | sed 's/.*[#@]//')
if [ -z "$target" ] || [ ! -f "$target/release/libmemadapt.a" ]; then
    echo "$0: cannot find libmemadapt.a under the target directory '$target'" >&2
    exit 1
fi

install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 644 "$target/release/libmemadapt.a" "$prefix/lib/"
major=${version%%.*}
install -m 755 "$target/release/libmemadapt.so" "$prefix/lib/libmemadapt.so.$version"
ln -sf "libmemadapt.so.$version" "$prefix/lib/libmemadapt.so.$major"
ln -sf "libmemadapt.so.$major" "$prefix/lib/libmemadapt.so"
install -m 644 include/memadapt.h "$prefix/include/"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" memadapt.pc.in \
    >"$prefix/lib/pkgconfig/memadapt.pc"
echo "installed memadapt $version under $prefix"
echo "compile with: cc prog.c \$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs memadapt) -Wl,-rpath,$prefix/lib"
