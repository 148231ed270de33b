#!/bin/bash
# Throughput benchmark: aiscp against the reference loop, dd, cp and the storage's
# O_DIRECT ceilings, on the same file, in one run.
#
#   bench/run.sh [--size 1G] [--dir PATH] [--dst-dir PATH] [--rounds 3] [--cpu-only] [--out DIR] [--label NAME]
#                [--methods a,b,...] [--skip a,b,...] [--bs 64M] [--budget SECS] [--no-drop]
#                [--assume-gbps X] [--keep] [--extra 'NAME=[BINARY] ARGS'...]
#
# Methods (GPU mode, the default):
#   aiscp         aiscp --backend gpu (engine defaults; gpu only so it can't fall back to host)
#   aiscp_ref     aiscp --backend gpu --route library --streams 1 --chunk-size 0x7ffff000
#                 (the reference's shape)
#   aiscp_lib     aiscp --backend gpu --route library (cuFileRead/Write on registered files)
#   aiscp_s8      aiscp --backend gpu --streams 8 (through --methods only)
#   aiscp_async   aiscp --backend gpu --route library --async
#   ref_2G        C port of the reference loop on cuFile, default chunk 0x7ffff000 (ratio base)
#   dd_direct     dd iflag=direct oflag=direct bs=BS
#   cp            GNU cp
#   hostcopy_qd8  host-only O_DIRECT copy, 8 threads x 16 MiB (rawbw copy)
#   read_qd1/_qd8, write_qd1/_qd8   storage O_DIRECT ceilings (rawbw; 1 x 64 MiB, 8 x 16 MiB)
# --cpu-only (no GPU needed): aiscp_host (--backend host, defaults), aiscp_host_1s (--backend
#   host --streams 1 --chunk-size BS: dd's shape), dd_direct, cp, hostcopy_qd8 and the ceilings.
# Also available through --methods: ref_64M (reference loop, 64 MiB chunk).
# --extra 'NAME=[BINARY] ARGS' (repeatable) adds a method NAME running BINARY (an aiscp build;
#   default AISCP_BIN) as `BINARY --no-progress ARGS SRC DST`, e.g. --extra 's2=--backend gpu
#   --streams 2`: variants side by side with the defaults, in the same run. Extras always run,
#   after the --methods/--skip selection.
#
# --dst-dir PATH puts DST on another filesystem (SRC stays in --dir): two RAM-backed ext4s
#   (scripts/gpu-setup.sh --fastdisk SIZE --mnt DIR, twice) stand in for NVMe to NVMe, each
#   loop device with its own kernel worker. The timed span then syncs DST's filesystem.
#
# Every run: DST removed, SRC evicted from the page cache (fadvise) and, as root, every cache
# dropped; the timed span is the whole process plus syncfs of the target filesystem. Methods are
# rotated each round. Each copying method's output is checked against SRC's digest once,
# outside the timing. At the end: a markdown table of medians and ratios on stdout, also
# appended to OUT/summary.md; per-run rows in OUT/results.tsv, medians in OUT/medians.tsv,
# command output in OUT/bench.log. OUT defaults to $OUT, else DIR/results.
#
# Time: an estimate is printed first and refined after round 1; --budget SECS stops starting
# rounds (and runs) that would end past SECS, so a device command stays inside its limit.
# AISCP_BIN overrides the aiscp path; BENCH_SHARED the folder with rawbw.c/refloop_cufile.c.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

size=1G dir=/var/tmp/aiscp-bench dst_dir="" rounds=3 cpu_only=0 out="" label="" only="" skip=""
bs=64M budget=0 no_drop=0 assume="" keep=0
extras=()
declare -A extra_args
while (($#)); do
    case $1 in
        --size) size=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --dst-dir) dst_dir=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --cpu-only) cpu_only=1; shift ;;
        --out) out=$2; shift 2 ;;
        --label) label=$2; shift 2 ;;
        --methods) only=$2; shift 2 ;;
        --skip) skip=$2; shift 2 ;;
        --bs) bs=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        --no-drop) no_drop=1; shift ;;
        --assume-gbps) assume=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --extra)
            [[ $2 =~ ^([A-Za-z0-9_]+)=(.*)$ ]] || die "--extra wants NAME=[BINARY] ARGS, got: $2"
            extras+=("${BASH_REMATCH[1]}") extra_args[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
            shift 2 ;;
        -h | --help) usage ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
bytes=$(parse_size "$size") || die "bad --size: $size"
bs_bytes=$(parse_size "$bs") || die "bad --bs: $bs"
((bytes > 0)) || die "--size must be > 0"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "bad --rounds: $rounds"
mkdir -p "$dir" || die "cannot create $dir"
dir=$(cd "$dir" && pwd)
dst_dir=${dst_dir:-$dir}
mkdir -p "$dst_dir" || die "cannot create $dst_dir"
dst_dir=$(cd "$dst_dir" && pwd)
out=${out:-${OUT:-$dir/results}}
mkdir -p "$out" || die "cannot create $out"
start=$SECONDS
src_dev=$(findmnt -no SOURCE --target "$dir" | head -1)
fstype=$(findmnt -no FSTYPE --target "$dir" | head -1)
mode=$( ((cpu_only)) && echo cpu || echo gpu)
dst_dev=$(findmnt -no SOURCE --target "$dst_dir" | head -1)
two=$([[ $dst_dev != "$src_dev" ]] && echo "-to-$(basename "$dst_dev")")
label=${label:-$mode-$(basename "$src_dev")$two-$(human_size "$bytes")}
bin=$dir/.bench-bin
mkdir -p "$bin"
# One run per directory at a time: runs share SRC, DST and the built tools.
exec 9> "$dir/.bench.lock"
flock -n 9 || die "another bench/run.sh is running in $dir"
log=$out/bench.log
SRC=$dir/bench-src-$(human_size "$bytes").bin
DST=$dst_dir/bench-dst.bin
{ echo; echo "######## $label $(date -u +%FT%TZ)"; } >> "$log"

# Space for SRC and DST (SRC may already be there).
need_src=$([[ -f $SRC ]] && echo 0 || echo "$bytes")
need_dst=$((bytes + (64 << 20)))
if [[ $dst_dev == "$src_dev" ]]; then need_dst=$((need_dst + need_src)) need_src=0; fi
for d in "$dir:$need_src" "$dst_dir:$need_dst"; do
    avail=$(df --output=avail -B1 "${d%:*}" | tail -1)
    ((avail > ${d##*:})) || die "${d%:*} has $((avail >> 20)) MiB free; this run needs $((${d##*:} >> 20)) MiB"
done

# Tools: rawbw (ceilings, threaded host copy) and the reference loop, built here with gcc.
have_rawbw=0 have_ref=0 have_aiscp=0 have_smi=0
if shared=$(shared_bench_dir) && command -v gcc >/dev/null; then
    if gcc -O2 -o "$bin/rawbw" "$shared/rawbw.c" -lpthread >> "$log" 2>&1; then have_rawbw=1; fi
    if ((!cpu_only)); then
        cu=$CUDA_HOME/targets/x86_64-linux
        if gcc -O2 -o "$bin/refloop" "$shared/refloop_cufile.c" -I"$CUDA_HOME/include" -I"$cu/include" \
            -L"$CUDA_HOME/lib64" -L"$cu/lib" -Wl,-rpath,"$CUDA_HOME/lib64" -Wl,-rpath,"$cu/lib" \
            -lcufile -lcudart >> "$log" 2>&1; then
            have_ref=1
        else
            say "reference loop did not build (see $log): ref_* methods dropped"
        fi
    fi
else
    say "no gcc or no rawbw.c (.bench/ or ../shared/bench): ceilings fall back to dd"
fi
[[ -x $AISCP_BIN ]] && have_aiscp=1
((!cpu_only)) && command -v nvidia-smi >/dev/null && have_smi=1

if ((!cpu_only)); then
    if ((EUID == 0)); then bash "$HERE/../scripts/gpu-setup.sh" --udev "$dir" --udev "$dst_dir" | sed 's/^/# /'; fi
    if ((have_aiscp)) && ! aiscp_preflight "$dir" "$bin/preflight.log" | sed 's/^/# /'; then
        say "aiscp cannot use cuFile here (see $log): its runs will fail and show why"
        cat "$bin/preflight.log" >> "$log"
    fi
fi

# Method list, then what's available, then --methods / --skip.
if ((cpu_only)); then
    all=(aiscp_host aiscp_host_1s dd_direct cp hostcopy_qd8 read_qd1 read_qd8 write_qd1 write_qd8)
else
    all=(aiscp aiscp_lib aiscp_ref aiscp_async ref_2G dd_direct cp hostcopy_qd8 read_qd1 read_qd8 write_qd1 write_qd8)
fi
((have_rawbw)) || all=("${all[@]/hostcopy_qd8/}" read_dd write_dd)
[[ -n $only ]] && IFS=, read -r -a all <<< "$only"
methods=()
for m in "${all[@]}"; do
    [[ -z $m || ,$skip, == *,$m,* ]] && continue
    case $m in
        aiscp*) ((have_aiscp)) || { say "$AISCP_BIN missing: $m dropped"; continue; } ;;
        ref_*) ((have_ref)) || { say "no reference loop: $m dropped"; continue; } ;;
        hostcopy_qd8 | read_qd* | write_qd*) ((have_rawbw)) || { say "no rawbw: $m dropped"; continue; } ;;
    esac
    methods+=("$m")
done
for m in "${extras[@]}"; do
    read -r -a words <<< "${extra_args[$m]}"
    xbin=$AISCP_BIN
    [[ ${words[0]:-} == */* ]] && xbin=${words[0]}
    [[ -x $xbin ]] || { say "$xbin missing: $m dropped"; continue; }
    methods+=("$m")
done
((${#methods[@]})) || die "no methods to run"

# method_cmd NAME: sets CMD (argv) and KIND (aiscp, ref, hostcopy, read, write).
method_cmd() {
    local a=("$AISCP_BIN" --no-progress)
    case $1 in
        aiscp) KIND=aiscp CMD=("${a[@]}" --backend gpu "$SRC" "$DST") ;;
        aiscp_s8) KIND=aiscp CMD=("${a[@]}" --backend gpu --streams 8 "$SRC" "$DST") ;;
        aiscp_lib) KIND=aiscp CMD=("${a[@]}" --backend gpu --route library "$SRC" "$DST") ;;
        aiscp_ref) KIND=aiscp CMD=("${a[@]}" --backend gpu --route library --streams 1 --chunk-size 0x7ffff000 "$SRC" "$DST") ;;
        aiscp_async) KIND=aiscp CMD=("${a[@]}" --backend gpu --route library --async "$SRC" "$DST") ;;
        aiscp_host) KIND=aiscp CMD=("${a[@]}" --backend host "$SRC" "$DST") ;;
        aiscp_host_1s) KIND=aiscp CMD=("${a[@]}" --backend host --streams 1 --chunk-size "$bs_bytes" "$SRC" "$DST") ;;
        ref_2G) KIND=ref CMD=("$bin/refloop" "$SRC" "$DST" $((0x7ffff000))) ;;
        ref_64M) KIND=ref CMD=("$bin/refloop" "$SRC" "$DST" $((64 << 20))) ;;
        dd_direct) KIND=hostcopy CMD=(dd if="$SRC" of="$DST" bs="$bs_bytes" iflag=direct oflag=direct) ;;
        cp) KIND=hostcopy CMD=(cp "$SRC" "$DST") ;;
        hostcopy_qd8) KIND=hostcopy CMD=("$bin/rawbw" copy "$SRC" "$DST" "$bytes" $((16 << 20)) 8) ;;
        read_qd1) KIND=read CMD=("$bin/rawbw" read "$SRC" "$bytes" $((64 << 20)) 1) ;;
        read_qd8) KIND=read CMD=("$bin/rawbw" read "$SRC" "$bytes" $((16 << 20)) 8) ;;
        write_qd1) KIND=write CMD=("$bin/rawbw" write "$DST" "$bytes" $((64 << 20)) 1) ;;
        write_qd8) KIND=write CMD=("$bin/rawbw" write "$DST" "$bytes" $((16 << 20)) 8) ;;
        read_dd) KIND=read CMD=(dd if="$SRC" of=/dev/null bs="$bs_bytes" iflag=direct) ;;
        write_dd) KIND=write CMD=(dd if=/dev/zero of="$DST" bs="$bs_bytes" count="$bytes" iflag=count_bytes oflag=direct) ;;
        *)
            [[ -n ${extra_args[$1]:-} ]] || return 1
            local words xbin=$AISCP_BIN
            read -r -a words <<< "${extra_args[$1]}"
            if [[ ${words[0]} == */* ]]; then xbin=${words[0]} words=("${words[@]:1}"); fi
            KIND=aiscp CMD=("$xbin" --no-progress "${words[@]}" "$SRC" "$DST")
            ;;
    esac
}
methods_tsv=$bin/methods-$label.tsv
: > "$methods_tsv"
for m in "${methods[@]}"; do
    method_cmd "$m" || die "unknown method: $m"
    printf '%s\t%s\t%s\n' "$m" "$KIND" "${CMD[*]}" >> "$methods_tsv"
done

# Caches: drop them all when allowed; SRC is evicted with fadvise in any case.
drop=()
if ((no_drop)); then
    cache_note="not dropped (--no-drop); SRC evicted with fadvise before each run"
elif { sync && echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then
    drop=(--drop) cache_note="dropped before each run (drop_caches)"
else
    cache_note="NOT dropped (not permitted: not root?); SRC evicted with fadvise before each run"
fi

n=${#methods[@]}
ncopy=$(grep -cE $'\t(aiscp|ref|hostcopy)\t' "$methods_tsv")
assume=${assume:-$( ((cpu_only)) && echo 0.5 || echo 0.7)}
gen=$([[ -f $SRC ]] && echo 0 || echo 1)
est=$(awk -v b="$bytes" -v n="$n" -v r="$rounds" -v c="$ncopy" -v a="$assume" -v g="$gen" \
    'BEGIN { gb = b / 1e9; printf "%d", r * n * (gb / a + 1.5) + c * gb / 1.0 + g * gb * 1.5 }')
say "bench $label: $(human_size "$bytes") file in $dir ($fstype on $src_dev) to $dst_dir ($dst_dev), $rounds round(s), caches $cache_note"
say "methods: ${methods[*]}; digest $DIGEST_NAME; out $out"
say "estimate: ~$est s (assuming $assume GB/s per method; --assume-gbps)$( ((budget > 0)) && echo ", budget $budget s")"

if [[ -f $SRC && -f $SRC.digest && $SRC.digest -nt $SRC ]] &&
    [[ $(stat -c %s "$SRC") == "$bytes" && $(cut -d' ' -f1 "$SRC.digest") == "$DIGEST_NAME" ]]; then
    SUM=$(cut -d' ' -f2 "$SRC.digest")
    say "reusing $SRC"
else
    t=$SECONDS
    gen_random "$SRC" "$bytes"
    SUM=$(digest "$SRC")
    echo "$DIGEST_NAME $SUM" > "$SRC.digest"
    say "generated $SRC in $((SECONDS - t)) s"
fi

results=$out/results.tsv
[[ -s $results ]] || printf 'label\tround\tmethod\tbytes\trc\twall_s\tgbps\tuser_s\tsys_s\tcpu_s_per_gib\tmaxrss_mib\tgpu_mib\tcheck\tcache\n' > "$results"
declare -A checked

finish() {
    rm -f "$DST"
    ((keep)) || rm -f "$SRC" "$SRC.digest"
    echo
    {
        python3 "$HERE/stats.py" "$results" "$label" "$methods_tsv" "$out/medians.tsv"
        echo "Commands ($(human_size "$bytes") file in $dir on $fstype, $src_dev, DST in $dst_dir on $dst_dev; caches $cache_note):"
        echo
        while IFS=$'\t' read -r m _ c; do echo "- \`$m\`: \`$c\`"; done < "$methods_tsv"
        echo
    } | tee -a "$out/summary.md"
    say "done in $((SECONDS - start)) s; files in $out: results.tsv medians.tsv summary.md bench.log"
}
trap 'say "interrupted: summarising what was measured"; finish; exit 130' INT TERM

tmo=$((30 + bytes / 100000000))
stopped=""
round_secs=0
for ((r = 1; r <= rounds; r++)); do
    elapsed=$((SECONDS - start))
    if ((budget > 0 && r > 1 && elapsed + round_secs > budget)); then
        stopped="round $r not started: ${elapsed} s + ~${round_secs} s would pass the ${budget} s budget"
        break
    fi
    rs=$SECONDS verify_secs=0
    k=$(((r - 1) % n))
    order=("${methods[@]:k}" "${methods[@]:0:k}")
    echo "== round $r/$rounds: ${order[*]}"
    for m in "${order[@]}"; do
        if ((budget > 0 && SECONDS - start > budget)); then
            stopped="stopped in round $r before $m: ${budget} s budget reached"
            break 2
        fi
        method_cmd "$m"
        rm -f "$DST"
        gpu=()
        ((have_smi && r == 1)) && [[ $KIND == aiscp || $KIND == ref ]] && gpu=(--gpu-sample)
        echo "=== round $r $m: ${CMD[*]}" >> "$log"
        line=$(python3 "$HERE/measure.py" "${drop[@]}" --evict "$SRC" --sync "$dst_dir" --timeout "$tmo" \
            "${gpu[@]}" --log "$log" -- "${CMD[@]}")
        IFS=$'\t' read -r rc wall user sys rss gmib cache <<< "$line"
        check=-
        if [[ $rc == 0 && $KIND =~ ^(aiscp|ref|hostcopy)$ && -z ${checked[$m]:-} ]]; then
            t=$SECONDS
            if [[ $(stat -c %s "$DST" 2>/dev/null) != "$bytes" ]]; then
                check="MISMATCH(size)"
            elif [[ $(digest "$DST") == "$SUM" ]]; then
                check=match
            else
                check=MISMATCH
            fi
            checked[$m]=1
            verify_secs=$((verify_secs + SECONDS - t))
        fi
        read -r gbps cpug rssm < <(awk -v b="$bytes" -v w="$wall" -v u="$user" -v s="$sys" -v m="$rss" \
            'BEGIN { printf "%.4f %.3f %.1f\n", (w > 0 ? b / w / 1e9 : 0), (u + s) / (b / 1073741824), m / 1024 }')
        printf '%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$r" "$m" "$bytes" \
            "$rc" "$wall" "$gbps" "$user" "$sys" "$cpug" "$rssm" "$gmib" "$check" "$cache" >> "$results"
        printf '  %-14s %7.3f GB/s  %6.2f s  cpu %5.2f s/GiB  rss %6.0f MiB%s%s%s\n' "$m" "$gbps" "$wall" \
            "$cpug" "$rssm" "$([[ $gmib != - ]] && echo "  gpu $gmib MiB")" \
            "$([[ $check != - ]] && echo "  checksum $check")" "$([[ $rc != 0 ]] && echo "  FAILED rc=$rc (see bench.log)")"
    done
    round_secs=$((SECONDS - rs - verify_secs))
    if ((r == 1 && rounds > 1)); then
        say "round 1 took $((SECONDS - rs)) s ($verify_secs s verifying); $((rounds - 1)) more round(s): ~$(((rounds - 1) * round_secs)) s"
    fi
done
[[ -n $stopped ]] && say "$stopped"
trap - INT TERM
finish
