#!/bin/bash
# Directory-tree benchmark: `cp -r`, `xcp -r` (where installed) and aiscp variants on the
# same generated tree, one run, methods rotated each round.
#
#   bench/tree.sh --src-dir PATH --dst-dir PATH [--files 4000] [--size 256K|MIN-MAX] [--rounds 3]
#                 [--out DIR] [--label NAME] [--budget SECS]
#                 [--extra 'NAME=BINARY ARGS'...]
#
# The tree: FILES files of SIZE random bytes each (or, with MIN-MAX such as 1K-64K, of sizes
# drawn evenly from that range with a fixed seed), 100 to a directory, under SRC-DIR (kept
# and reused when a run with the same shape made it). Methods: cp (`cp -r`), aiscp (`aiscp
# -r`, engine defaults), aiscp_host (`aiscp --backend host -r`), xcp (`xcp -r`, when XCP_BIN
# or xcp on PATH runs), and each --extra: `BINARY --no-progress ARGS -r SRC DST` (an aiscp
# build) or, when BINARY is not an aiscp, `BINARY ARGS SRC DST`. TREE_METHODS narrows the
# first three (default "cp aiscp aiscp_host").
#
# Every run: DST removed, caches dropped (root) and SRC's files evicted; the timed span is
# the whole process plus syncfs of DST's filesystem (bench/measure.py). Each method's copy is
# checked once against SRC's digest (all files' bytes in name order). Rows go to
# OUT/results.tsv (same columns as bench/run.sh), a markdown table to stdout and
# OUT/summary.md. AISCP_BIN is the aiscp under test (default target/release/aiscp).
# aiscp and aiscp_host run with --stats=json (--extra builds without: older builds lack the
# fields); their start-up and shutdown seconds per round go to OUT/fixed.tsv, and the
# summary adds the GPU route's ceiling in this run: the host engine's time for the tree plus
# aiscp's own start-up and shutdown (medians).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

src_dir="" dst_dir="" files=4000 size=256K rounds=3 out="" label="" budget=0
extras=()
declare -A extra_args
while (($#)); do
    case $1 in
        --src-dir) src_dir=$2; shift 2 ;;
        --dst-dir) dst_dir=$2; shift 2 ;;
        --files) files=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --label) label=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        --extra)
            [[ $2 =~ ^([A-Za-z0-9_]+)=(.*)$ ]] || die "--extra wants NAME=BINARY ARGS, got: $2"
            extras+=("${BASH_REMATCH[1]}") extra_args[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
            shift 2 ;;
        -h | --help) usage ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ -n $src_dir && -n $dst_dir ]] || die "--src-dir and --dst-dir are required"
if [[ $size =~ ^([^-]+)-([^-]+)$ ]]; then
    lo=$(parse_size "${BASH_REMATCH[1]}") && hi=$(parse_size "${BASH_REMATCH[2]}") && ((lo <= hi)) ||
        die "bad --size: $size"
    bytes=$hi
else
    bytes=$(parse_size "$size") || die "bad --size: $size"
    lo=$bytes hi=$bytes
fi
[[ $files =~ ^[1-9][0-9]*$ ]] || die "bad --files: $files"
mkdir -p "$src_dir" "$dst_dir" || die "cannot create $src_dir or $dst_dir"
out=${out:-${OUT:-$dst_dir/results}}
mkdir -p "$out"
shape=${files}x$(human_size "$bytes")
((lo < hi)) && shape=${files}x$(human_size "$lo")-$(human_size "$hi")
label=${label:-tree-$shape}
SRC=$src_dir/tree-$shape
DST=$dst_dir/tree-dst
log=$out/bench.log
total=$((files * bytes))
start=$SECONDS

if [[ ! -f $SRC/.complete && $lo -lt $hi ]]; then
    rm -rf "$SRC"
    mkdir -p "$SRC"
    t=$SECONDS
    python3 - "$SRC" "$files" "$lo" "$hi" <<'PY'
import os, random, sys
root, n, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(n * 31 + hi)
total = 0
for i in range(n):
    d = os.path.join(root, f"d{i // 100:03d}")
    os.makedirs(d, exist_ok=True)
    size = rng.randint(lo, hi)
    with open(os.path.join(d, f"f{i:05d}"), "wb") as o:
        o.write(rng.randbytes(size))
    total += size
with open(os.path.join(root, ".bytes"), "w") as f:
    f.write(f"{total}\n")
PY
    touch "$SRC/.complete"
    say "generated $SRC ($files files of $size) in $((SECONDS - t)) s"
fi
if [[ ! -f $SRC/.complete ]]; then
    rm -rf "$SRC"
    mkdir -p "$SRC"
    t=$SECONDS
    # One random stream cut into files: fast, and every file differs.
    gen_random "$SRC/.all" "$total"
    python3 - "$SRC" "$files" "$bytes" <<'PY'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(os.path.join(root, ".all"), "rb") as f:
    for i in range(n):
        d = os.path.join(root, f"d{i // 100:03d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:05d}"), "wb") as o:
            o.write(f.read(size))
PY
    rm -f "$SRC/.all"
    touch "$SRC/.complete"
    say "generated $SRC ($files files of $(human_size "$bytes")) in $((SECONDS - t)) s"
fi
[[ -f $SRC/.bytes ]] && total=$(<"$SRC/.bytes")
tree_digest() { (cd "$1" && find . -type f ! -name .complete ! -name .bytes -print0 | sort -z | xargs -0 cat | "$DIGEST" | cut -d' ' -f1); }
[[ $DIGEST == py-sha256sum ]] && tree_digest() { (cd "$1" && find . -type f ! -name .complete ! -name .bytes -print0 | sort -z | xargs -0 cat | sha256sum | cut -d' ' -f1); }
SUM=$(tree_digest "$SRC")

xcp=${XCP_BIN:-$(command -v xcp || true)}
read -ra methods <<< "${TREE_METHODS:-cp aiscp aiscp_host}"
[[ -n $xcp && -x $xcp ]] && methods+=(xcp)
methods+=("${extras[@]}")
method_cmd() {
    case $1 in
        cp) CMD=(cp -r "$SRC" "$DST") ;;
        xcp) CMD=("$xcp" -r "$SRC" "$DST") ;;
        aiscp) CMD=("$AISCP_BIN" --no-progress --stats=json -r "$SRC" "$DST") ;;
        aiscp_host) CMD=("$AISCP_BIN" --no-progress --stats=json --backend host -r "$SRC" "$DST") ;;
        *)
            local words
            read -r -a words <<< "${extra_args[$1]}"
            if [[ $(basename "${words[0]}") == aiscp* ]]; then
                CMD=("${words[0]}" --no-progress "${words[@]:1}" -r "$SRC" "$DST")
            else
                CMD=("${words[@]}" "$SRC" "$DST")
            fi ;;
    esac
}
drop=()
{ sync && echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null && drop=(--drop)
methods_tsv=$src_dir/.methods-$label.tsv
: > "$methods_tsv"
for m in "${methods[@]}"; do
    method_cmd "$m"
    # cp and xcp are the host copies aiscp's ratios compare against.
    kind=aiscp
    [[ $m == cp || $m == xcp ]] && kind=hostcopy
    printf '%s\t%s\t%s\n' "$m" "$kind" "${CMD[*]}" >> "$methods_tsv"
done
say "tree $label: $shape in $SRC -> $DST ($(findmnt -no SOURCE --target "$src_dir") -> $(findmnt -no SOURCE --target "$dst_dir")), $rounds round(s), methods ${methods[*]}"
results=$out/results.tsv
fixed=$out/fixed.tsv
[[ -s $fixed ]] || printf 'label\tround\tmethod\tbackend\tstartup_s\tshutdown_s\n' > "$fixed"
[[ -s $results ]] || printf 'label\tround\tmethod\tbytes\trc\twall_s\tgbps\tuser_s\tsys_s\tcpu_s_per_gib\tmaxrss_mib\tgpu_mib\tcheck\tcache\n' > "$results"
declare -A checked
n=${#methods[@]}
for ((r = 1; r <= rounds; r++)); do
    k=$(((r - 1) % n))
    for m in "${methods[@]:k}" "${methods[@]:0:k}"; do
        ((budget > 0 && SECONDS - start > budget)) && { say "budget reached in round $r"; break 2; }
        method_cmd "$m"
        rm -rf "$DST"
        echo "=== round $r $m: ${CMD[*]}" >> "$log"
        log_at=$(stat -c %s "$log")
        # Evicting SRC's files one by one costs more than the copy; drop_caches covers them.
        line=$(python3 "$HERE/measure.py" "${drop[@]}" --sync "$dst_dir" --timeout 300 --log "$log" -- "${CMD[@]}")
        IFS=$'\t' read -r rc wall user sys rss gmib cache <<< "$line"
        check=-
        if [[ $rc == 0 && -z ${checked[$m]:-} ]]; then
            [[ $(tree_digest "$DST") == "$SUM" ]] && check=match || check=MISMATCH
            checked[$m]=1
        fi
        read -r gbps cpug rssm < <(awk -v b="$total" -v w="$wall" -v u="$user" -v s="$sys" -v m="$rss" \
            'BEGIN { printf "%.4f %.3f %.1f\n", (w > 0 ? b / w / 1e9 : 0), (u + s) / (b / 1073741824), m / 1024 }')
        printf '%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$r" "$m" "$total" \
            "$rc" "$wall" "$gbps" "$user" "$sys" "$cpug" "$rssm" "$gmib" "$check" "$cache" >> "$results"
        # aiscp's --stats=json line, from what this run added to the log.
        tail -c +$((log_at + 1)) "$log" | python3 "$HERE/fixed_costs.py" row "$label" "$r" "$m" "$rc" >> "$fixed"
        printf '  %-14s %7.3f GB/s  %6.2f s  rss %6.0f MiB%s%s\n' "$m" "$gbps" "$wall" "$rssm" \
            "$([[ $check != - ]] && echo "  checksum $check")" "$([[ $rc != 0 ]] && echo "  FAILED rc=$rc (see $log)")"
    done
done
rm -rf "$DST"
{
    python3 "$HERE/stats.py" "$results" "$label" "$methods_tsv" "$out/medians.tsv"
    python3 "$HERE/fixed_costs.py" ceiling "$results" "$fixed" "$label"
    echo "Commands ($shape tree, SRC $SRC, DST $DST):"
    echo
    while IFS=$'\t' read -r m _ c; do echo "- \`$m\`: \`$c\`"; done < "$methods_tsv"
    echo
} | tee -a "$out/summary.md"
