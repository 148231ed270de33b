#!/bin/bash
# Prepare the GPU machine for aiscp runs. Idempotent: run it as often as you like.
#
#   scripts/gpu-setup.sh [--udev PATH]... [--fastdisk SIZE [--mnt DIR]] [--teardown]
#
# - Always: the udev record cuFile needs for the block device under / (and under each --udev
#   PATH). The VM runs no udev, so without it cuFileHandleRegister fails with 5027
#   ("udev property not found: ID_FS_USAGE"). aiscp itself never writes there.
# - --fastdisk SIZE: a RAM-backed ext4 standing in for fast NVMe: a sparse file in /dev/shm,
#   a loop device with direct I/O on (so O_DIRECT reaches the RAM file without a second page
#   cache), mounted at --mnt (default /mnt/fast) with data=ordered, plus its udev record. Run
#   it twice with two --mnt folders for two RAM filesystems (SRC on one, DST on the other:
#   each loop device has its own kernel worker, the better stand-in for NVMe to NVMe).
# - --teardown: unmount the RAM disk and free its memory.
# Prints one line per thing it checked or did, then a short environment summary.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

udev_paths=(/)
fast_size=""
mnt=/mnt/fast
teardown=0
while (($#)); do
    case $1 in
        --udev) udev_paths+=("$2"); shift 2 ;;
        --fastdisk) fast_size=$2; shift 2 ;;
        --mnt) mnt=$2; shift 2 ;;
        --teardown) teardown=1; shift ;;
        -h | --help) usage ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
((EUID == 0)) || die "run as root (udev records, loop devices, mounts)"
# One image per mount point: /mnt/fast -> /dev/shm/aiscp-fast.img.
img=/dev/shm/aiscp-$(basename "$mnt").img

if ((teardown)); then
    if mountpoint -q "$mnt"; then
        loop=$(findmnt -no SOURCE "$mnt")
        umount "$mnt" && echo "unmounted $mnt"
        [[ $loop == /dev/loop* ]] && losetup -d "$loop" && echo "detached $loop"
    fi
    rm -f "$img" && echo "removed $img"
    exit 0
fi

if [[ -n $fast_size ]]; then
    bytes=$(parse_size "$fast_size") || die "bad --fastdisk size: $fast_size"
    mkdir -p "$mnt"
    if mountpoint -q "$mnt"; then
        echo "fastdisk: $mnt already mounted ($(findmnt -no SOURCE,FSTYPE "$mnt" | tr -s ' '))"
    else
        shm_free=$(($(df --output=avail -B1 /dev/shm | tail -1)))
        ((bytes < shm_free)) || die "/dev/shm has $((shm_free >> 30)) GiB free, --fastdisk wants $((bytes >> 30))"
        # Reuse an image that a previous setup left attached; otherwise make a fresh one.
        loop=$(losetup -j "$img" -O NAME -n 2>/dev/null | head -1 || true)
        if [[ -z $loop ]]; then
            rm -f "$img"
            truncate -s "$bytes" "$img"
            mkfs.ext4 -q -F -E nodiscard "$img"
            loop=$(losetup --find --show --direct-io=on "$img") || die "no free loop device"
        fi
        # discard: deleted files give their RAM back to /dev/shm (loop punches holes).
        mount -o data=ordered,discard "$loop" "$mnt"
        echo "fastdisk: $loop ($img, $(human_size "$bytes")) mounted on $mnt, direct I/O $(cat "/sys/block/${loop#/dev/}/loop/dio" 2>/dev/null || echo '?')"
    fi
    udev_paths+=("$mnt")
fi

declare -A seen
for p in "${udev_paths[@]}"; do
    dev=$(findmnt -no MAJ:MIN --target "$p" | head -1 | tr -d ' ')
    [[ -n ${seen[$dev]:-} ]] && continue
    seen[$dev]=1
    udev_record "$p"
done

# Environment summary: what the runs will meet.
echo "env: $(uname -r), $(nproc) cores, $(($(awk '/MemTotal/ {print $2}' /proc/meminfo) >> 20)) GiB RAM, root on $(findmnt -no SOURCE,FSTYPE / | tr -s ' ')"
if command -v nvidia-smi >/dev/null; then
    echo "env: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
fi
for lib in "$CUDA_HOME/lib64/libcufile.so.0" /usr/lib/x86_64-linux-gnu/libcuda.so.1; do
    [[ -e $lib ]] && echo "env: $lib -> $(readlink -f "$lib")"
done
echo "env: cufile.json: ${CUFILE_ENV_PATH_JSON:-/etc/cufile.json} $([[ -f ${CUFILE_ENV_PATH_JSON:-/etc/cufile.json} ]] && echo present || echo absent); nvidia-fs module: $(lsmod 2>/dev/null | grep -q '^nvidia_fs' && echo loaded || echo 'absent (cuFile compatibility mode)')"
echo "env: digest $DIGEST; openssl $(command -v openssl >/dev/null && echo yes || echo no); gcc $(command -v gcc >/dev/null && echo yes || echo no); nvcc $([[ -x $CUDA_HOME/bin/nvcc ]] && echo yes || echo no)"
