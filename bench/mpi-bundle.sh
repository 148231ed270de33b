#!/bin/bash
# Packs this machine's Open MPI runtime (Debian's openmpi-bin and the libraries it loads)
# into one relocatable folder, for a GPU machine that has no Open MPI of its own:
#
#   bench/mpi-bundle.sh [DIR]        # default target/openmpi-bundle
#
# On the other machine: source DIR/env.sh, then mpirun is the bundled one and the aiscp
# built here with --features mpi finds its libraries (Open MPI honours OPAL_PREFIX).
set -euo pipefail
dir=${1:-target/openmpi-bundle}
rm -rf "$dir"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pkgs=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libhwloc-plugins
    libevent-core-2.1-7 libevent-pthreads-2.1-7 libevent-2.1-7)
for p in "${pkgs[@]}"; do
    dpkg -L "$p" 2>/dev/null | grep -v '^/usr/share/\(doc\|man\|lintian\)' | while read -r f; do
        if [[ -f $f || -L $f ]] && ! [[ -d $f ]]; then
            mkdir -p "$dir$(dirname "$f")"
            cp -a "$f" "$dir$f"
        fi
    done
done
# The alternatives links point at /etc; name the real programs.
ln -sf orterun "$dir/usr/bin/mpirun"
ln -sf orterun "$dir/usr/bin/mpiexec"
# Shared libraries those need that a minimal system may lack (glibc itself excluded).
for lib in $(ldd /usr/lib/x86_64-linux-gnu/libmpi.so.40 /usr/bin/orted 2>/dev/null |
    awk '/=> \// { print $3 }' | sort -u); do
    case $(basename "$lib") in libc.so*|libm.so*|ld-linux*|libpthread*|libdl*|librt*) continue ;; esac
    [[ -e $dir/usr/lib/x86_64-linux-gnu/$(basename "$lib") ]] ||
        cp -L "$lib" "$dir/usr/lib/x86_64-linux-gnu/"
done
cat > "$dir/env.sh" <<'EOF'
# Source me: the bundled Open MPI first on PATH and the loader path.
b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=$b/usr
export PATH=$b/usr/bin:$PATH
export LD_LIBRARY_PATH=$b/usr/lib/x86_64-linux-gnu:$b/usr/lib/x86_64-linux-gnu/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PMIX_INSTALL_PREFIX=$b/usr
# One node: shared memory between ranks; plugins whose libraries (UCX, libfabric...) the
# machine lacks are skipped without a warning each.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mca_base_component_show_load_errors=0
EOF
du -sh "$dir"
