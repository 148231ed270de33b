#!/usr/bin/env bash
# Runs a command as on a fresh machine, without changing this one: in a private mount
# namespace where
#   - what .ci/run installs for the optional tests is hidden: Debian's libamdhip64-5,
#     strace, zsh, fish, man and Open MPI's launchers (an overlay over each directory, with a
#     whiteout for each file: the packages stay installed, the command just cannot see them);
#   - /tmp is a new empty directory (on the same filesystem, mode 1777), removed afterwards;
#   - /tmp/aiscp-UID, where aiscp looks for the staging service when XDG_RUNTIME_DIR is
#     unset, is another user's: by default a directory of nobody's, mode 0777, holding a
#     plain file named service.sock (--runtime-dir=file: a plain file of nobody's instead;
#     --runtime-dir=none: nothing there).
# Nothing outside the command sees any of it, and nothing is left behind. XDG_RUNTIME_DIR
# is unset for the command. Needs root (unshare, mount, chown).
#
#   scripts/fresh-machine.sh [--runtime-dir=dir|file|none] [--show=PATH]... COMMAND...
#
# --show=PATH keeps PATH visible (e.g. --show=/usr/bin/man). Exit: COMMAND's status, or 2
# when the namespace cannot be made.
set -euo pipefail

runtime=dir
show=()
while [ $# -gt 0 ]; do
  case $1 in
    --runtime-dir=dir | --runtime-dir=file | --runtime-dir=none) runtime=${1#*=} ;;
    --show=*) show+=("${1#*=}") ;;
    --) shift; break ;;
    -*) echo "fresh-machine.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
[ $# -gt 0 ] || { echo "usage: fresh-machine.sh [--runtime-dir=dir|file|none] [--show=PATH]... COMMAND..." >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "fresh-machine.sh: needs root (unshare, mount)" >&2; exit 2; }

if [ -z "${FRESH_MACHINE_INSIDE:-}" ]; then
  # The private /tmp lives in the real /tmp (same filesystem, so holes, xattrs and O_DIRECT
  # behave as there) and goes when the command ends, however it ends.
  tmp=$(mktemp -d /tmp/fresh-machine.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  status=0
  FRESH_MACHINE_INSIDE=$tmp unshare --mount --propagation private -- \
    "$0" "--runtime-dir=$runtime" "${show[@]/#/--show=}" -- "$@" || status=$?
  exit "$status"
fi

# Inside the namespace from here on.
tmp=$FRESH_MACHINE_INSIDE
unset FRESH_MACHINE_INSIDE XDG_RUNTIME_DIR
mkdir "$tmp/tmp" "$tmp/whiteouts"
mount -t tmpfs -o mode=0700 whiteouts "$tmp/whiteouts"

# hide DIR NAME_GLOB...: an overlay over DIR whose top layer whites out the matching names.
hide() {
  local dir=$1 layer name path found=0
  shift
  layer=$tmp/whiteouts/$(echo "$dir" | tr / _)
  mkdir -p "$layer"
  for glob in "$@"; do
    for path in "$dir"/$glob; do
      [ -e "$path" ] || [ -L "$path" ] || continue
      for keep in "${show[@]}"; do [ "$keep" = "$path" ] && continue 2; done
      name=${path##*/}
      mknod "$layer/$name" c 0 0
      found=1
    done
  done
  [ "$found" -eq 1 ] || return 0
  mount -t overlay overlay -o "ro,lowerdir=$layer:$dir" "$dir" || {
    echo "fresh-machine.sh: cannot hide files in $dir (overlay mount failed)" >&2
    exit 2
  }
}
libdir=/usr/lib/$(uname -m)-linux-gnu
hide "$libdir" 'libamdhip64.so*' 'libmpi.so*'
hide /usr/bin strace zsh 'zsh[0-9]*' fish man mpirun mpiexec mpicc orterun
hide /usr/local/bin strace zsh fish man mpirun mpiexec mpicc

chmod 1777 "$tmp/tmp"
mount --bind "$tmp/tmp" /tmp
uid=$(id -u)
case $runtime in
  dir)
    mkdir "/tmp/aiscp-$uid"
    touch "/tmp/aiscp-$uid/service.sock"
    chown -R nobody "/tmp/aiscp-$uid"
    chmod 777 "/tmp/aiscp-$uid"
    ;;
  file) touch "/tmp/aiscp-$uid" && chown nobody "/tmp/aiscp-$uid" ;;
  none) ;;
esac
exec "$@"
