# shellcheck shell=bash
# Helpers shared by scripts/gpu-*.sh and bench/run.sh. Source it; it defines functions only.
#
# Binary locations (relative to the repository root unless absolute):
#   AISCP_BIN      aiscp release binary      (default target/release/aiscp)
#   ROUNDTRIP_BIN  hipfile-rs example        (default target/release/examples/roundtrip)
#   BENCH_SHARED   shared/bench C sources    (default .bench, then ../shared/bench)

REPO_ROOT=${REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
AISCP_BIN=${AISCP_BIN:-$REPO_ROOT/target/release/aiscp}
ROUNDTRIP_BIN=${ROUNDTRIP_BIN:-$REPO_ROOT/target/release/examples/roundtrip}
# Where CUDA lives on the GPU machine (headers and libcufile for the C reference loop).
if [[ -z ${CUDA_HOME:-} ]]; then
    CUDA_HOME=/usr/local/cuda
    [[ -d $CUDA_HOME ]] || CUDA_HOME=$(compgen -G '/usr/local/cuda-*' | sort -V | tail -1 || true)
    CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
fi

die() { echo "error: $*" >&2; exit 2; }
# A comment line in a script's output (results are the other lines).
say() { echo "# $*"; }
# step TEXT: a progress comment, after the seconds since the calling script set t0.
step() { echo "# [$((SECONDS - ${t0:-0})) s] $*"; }
# drop: every cache dropped (root), dirty pages written first.
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# --help: the calling script's header comment, without the leading '# '.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0; }

# parse_size 512M | 1G | 4097 | 0x7ffff000 -> bytes (K/M/G/T are powers of 1024).
parse_size() {
    local s=${1^^} mult=1
    s=${s%IB}; s=${s%B}
    case $s in
        *K) mult=$((1 << 10)); s=${s%K} ;;
        *M) mult=$((1 << 20)); s=${s%M} ;;
        *G) mult=$((1 << 30)); s=${s%G} ;;
        *T) mult=$((1 << 40)); s=${s%T} ;;
    esac
    [[ $s =~ ^(0X[0-9A-F]+|[0-9]+)$ ]] || return 1
    echo $((s * mult))
}

# human_size BYTES -> 0, 4097, 512M, 1G, 3G (exact binary units only, else bytes).
human_size() {
    local b=$1
    if ((b >= (1 << 30) && b % (1 << 30) == 0)); then echo "$((b >> 30))G"
    elif ((b >= (1 << 20) && b % (1 << 20) == 0)); then echo "$((b >> 20))M"
    else echo "$b"; fi
}

# gen_random FILE BYTES: incompressible random data, fast (AES-CTR keystream from openssl
# runs at several GB/s; python's os.urandom and /dev/urandom are the slower fallbacks).
gen_random() {
    local file=$1 bytes=$2 key iv
    if ((bytes == 0)); then : > "$file"; return; fi
    if command -v openssl >/dev/null; then
        key=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
        iv=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
        # head closes the pipe when done; openssl then dies of SIGPIPE, which is expected.
        { openssl enc -aes-128-ctr -nosalt -K "$key" -iv "$iv" < /dev/zero 2>/dev/null || true; } |
            head -c "$bytes" > "$file"
    elif command -v python3 >/dev/null; then
        python3 - "$file" "$bytes" <<'EOF'
import os, sys
n = int(sys.argv[2])
with open(sys.argv[1], "wb") as f:
    while n > 0:
        k = min(n, 64 << 20)
        f.write(os.urandom(k))
        n -= k
EOF
    else
        head -c "$bytes" /dev/urandom > "$file"
    fi
    [[ $(stat -c %s "$file") == "$bytes" ]] || die "could not generate $bytes random bytes in $file"
}

# The digest used for checksum verdicts: the fastest one installed. Python's hashlib uses
# OpenSSL's SHA-256 (SHA-NI where the CPU has it): several times faster than coreutils'
# sha256sum, which has no hardware path in the versions we meet.
digest_tool() {
    local t
    for t in xxh128sum b3sum; do
        if command -v "$t" >/dev/null; then echo "$t"; return; fi
    done
    if command -v python3 >/dev/null; then echo py-sha256sum; return; fi
    command -v sha256sum >/dev/null && { echo sha256sum; return; }
    die "no digest tool (xxh128sum, b3sum, python3 or sha256sum)"
}
DIGEST=${DIGEST:-$(digest_tool)}
# Short name for output lines: xxh128, b3, sha256.
DIGEST_NAME=${DIGEST%sum}
export DIGEST_NAME=${DIGEST_NAME#py-}

# digest FILE -> hex digest
digest() {
    if [[ $DIGEST == py-sha256sum ]]; then
        python3 -c '
import hashlib, sys
h = hashlib.sha256()
buf = bytearray(8 << 20)
view = memoryview(buf)
with open(sys.argv[1], "rb", buffering=0) as f:
    while n := f.readinto(buf):
        h.update(view[:n])
print(h.hexdigest())' "$1"
    else
        "$DIGEST" < "$1" | cut -d' ' -f1
    fi
}

# udev_record PATH: cuFile looks up ID_FS_USAGE in udev's database for the block device under
# PATH; VMs and containers without udev have none, and registration fails with 5027. Write the
# record (root only; idempotent). Prints what it did.
udev_record() {
    local path=$1 dev fstype rec
    dev=$(findmnt -no MAJ:MIN --target "$path" | head -1 | tr -d ' ') || return 1
    fstype=$(findmnt -no FSTYPE --target "$path" | head -1 | tr -d ' ')
    rec=/run/udev/data/b$dev
    if [[ $dev == 0:* ]]; then
        echo "udev: $path is on $fstype ($dev), not a block device: cuFile will refuse it (bounce path)"
        return 0
    fi
    if [[ -f $rec ]] && grep -q '^E:ID_FS_USAGE=' "$rec"; then
        echo "udev: $rec already present ($path on $fstype)"
        return 0
    fi
    if ((EUID != 0)); then
        echo "udev: $rec missing and not root: cuFile may fail with 5027 on $path"
        return 1
    fi
    mkdir -p /run/udev/data
    printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "${fstype:-ext4}" > "$rec"
    echo "udev: wrote $rec ($path on $fstype)"
}

# aiscp_preflight: make sure aiscp can load cuFile. If it cannot and the usual CUDA install
# exists, point AISCP_CUFILE_LIB at it for the rest of the run, and say so (a discovery problem
# is a finding, not something to hide).
aiscp_preflight() {
    local dir=$1 log=$2 lib
    [[ -x $AISCP_BIN ]] || { echo "preflight: $AISCP_BIN missing or not executable"; return 1; }
    head -c 4097 /dev/urandom > "$dir/.preflight-src"
    rm -f "$dir/.preflight-dst"
    if "$AISCP_BIN" --backend cufile --no-progress --debug "$dir/.preflight-src" "$dir/.preflight-dst" \
        > "$log" 2>&1; then
        echo "preflight: aiscp --backend cufile works: $(grep -im1 -E 'cufile|library' "$log" || true)"
        rm -f "$dir/.preflight-src" "$dir/.preflight-dst"
        return 0
    fi
    echo "preflight: aiscp --backend cufile failed: $(tail -1 "$log")"
    for lib in "$CUDA_HOME/lib64/libcufile.so.0" "$CUDA_HOME"/targets/x86_64-linux/lib/libcufile.so.0; do
        if [[ -z ${AISCP_CUFILE_LIB:-} && -e $lib ]]; then
            export AISCP_CUFILE_LIB=$lib
            rm -f "$dir/.preflight-dst"
            if "$AISCP_BIN" --backend cufile --no-progress --debug "$dir/.preflight-src" \
                "$dir/.preflight-dst" >> "$log" 2>&1; then
                echo "preflight: works with AISCP_CUFILE_LIB=$lib (not found by itself: a finding)"
                rm -f "$dir/.preflight-src" "$dir/.preflight-dst"
                return 0
            fi
            unset AISCP_CUFILE_LIB
        fi
    done
    rm -f "$dir/.preflight-src" "$dir/.preflight-dst"
    return 1
}

# shared_bench_dir: where rawbw.c and refloop_cufile.c are.
shared_bench_dir() {
    local d
    for d in "${BENCH_SHARED:-}" "$REPO_ROOT/.bench" "$REPO_ROOT/../shared/bench"; do
        if [[ -n $d && -f $d/rawbw.c ]]; then echo "$d"; return 0; fi
    done
    return 1
}
