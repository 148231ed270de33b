#!/usr/bin/env bash
# GNU coreutils' own cp tests, run against aiscp.
#
# usage: scripts/gnu-cp-tests.sh [--fake-gpu] [BINARY] [NAME_REGEX]
#
# Fetches the coreutils source this machine's coreutils package was built from (apt-get
# source; a deb-src entry is added if apt has none), and runs every tests/cp/*.sh plus the
# other tests whose print_ver_ line names cp (tests/mv/*, tests/misc/xattr.sh, ...), each with
# BINARY (default: the newer of target/release/aiscp and target/debug/aiscp) first on PATH
# as `cp`; every other program is the system's. Each test runs twice: with GNU cp, then with
# aiscp. Only tests GNU cp passes here count (the rest need SELinux, NFS, ...).
#
# The tests run in a clean environment except AISCP_* variables, which are passed through,
# and the variables GNU_CP_TESTS_PASSENV names (space-separated, e.g. XDG_RUNTIME_DIR, so
# that aiscp finds a staging service's per-user socket: scripts/through-service.sh):
# AISCP_BACKEND=host selects the host backend; --fake-gpu builds crates/fake-gpu and points
# aiscp's hipFile flavor at it. Tests that skip themselves as root run as the user `nobody`.
#
# Output: `PASS|FAIL|SKIP|KNOWN name` per test, then a tally; each run's logs are kept in
# $GNU_CP_TESTS_CACHE/logs. Exit 1 when a test GNU cp passes fails with aiscp and is not in
# DIFFERS_ON_PURPOSE; 2 when the harness can't run.
# Environment: GNU_CP_TESTS_CACHE (source cache, default /var/tmp/aiscp-gnu-cp-tests),
# GNU_CP_TESTS_JOBS (default: CPU count), GNU_CP_TESTS_TIMEOUT (seconds per test, default 180).
set -uo pipefail
umask 022

# Tests aiscp fails because it differs from cp on purpose (README, "Where aiscp differs from
# GNU cp on purpose"): `name: reason`, one a line.
DIFFERS_ON_PURPOSE=(
)

die() { echo "gnu-cp-tests: $*" >&2; exit 2; }
note() { echo "gnu-cp-tests: $*" >&2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
fake=0
[[ ${1:-} == --fake-gpu ]] && { fake=1; shift; }
bin=${1:-$(ls -t "$repo"/target/{release,debug}/aiscp 2>/dev/null | head -1)}
filter=${2:-.}
[[ -x $bin ]] || die "no aiscp binary (build one, or name it): ${bin:-target/*/aiscp}"
cache=${GNU_CP_TESTS_CACHE:-/var/tmp/aiscp-gnu-cp-tests}
parallel=${GNU_CP_TESTS_JOBS:-$(nproc)}
limit=${GNU_CP_TESTS_TIMEOUT:-180}
root=$([[ $(id -u) == 0 ]] && echo 1 || echo 0)

# What the tests need: the source (dpkg-source), ACL and xattr tools; as root, installed.
apt_install() {
  [[ $root == 1 ]] || { note "not root: not installing$*"; return 0; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
}
want=()
command -v dpkg-source >/dev/null || want+=(dpkg-dev)
command -v setfacl >/dev/null || want+=(acl)
command -v setfattr >/dev/null || want+=(attr)
[[ ${#want[@]} == 0 ]] || apt_install "${want[@]}" || die "cannot install ${want[*]}"

pkg=$(dpkg-query -W -f='${source:Package}' coreutils) || die "coreutils is not a Debian package here"
ver=$(dpkg-query -W -f='${source:Version}' coreutils)
src=$cache/$pkg-$ver
if [[ ! -f $src/.complete ]]; then
  note "fetching the $pkg $ver source (once; kept in $cache)"
  dl=$cache/download log=$cache/download.log
  rm -rf "$dl" "$src" && mkdir -p "$dl" && : >"$log" || die "cannot write $cache"
  fetch() { (cd "$dl" && apt-get source -q --download-only "$pkg=$ver") >>"$log" 2>&1; }
  if ! fetch; then
    [[ $root == 1 ]] || die "apt has no deb-src entry, and adding one needs root"
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$codename" >/etc/apt/sources.list.d/aiscp-gnu-cp-tests-src.sources
    apt-get update -qq >>"$log" 2>&1 || die "apt-get update failed (see $log)"
    fetch || die "apt-get source $pkg=$ver failed (see $log)"
  fi
  dpkg-source -x "$dl"/*.dsc "$src" >>"$log" 2>&1 || die "dpkg-source -x failed (see $log)"
  rm -rf "$dl"
  touch "$src/.complete"
fi

# The run folder: world-readable, so `nobody` can run the tests from it (a checkout under
# /root is not); the binary and the fake library are copied in for the same reason. Each of
# gnu/ and aiscp/ is a test's working directory, with its cp in src/ as `make check` has it.
run=$(mktemp -d /tmp/aiscp-gnu-cp-tests.XXXXXX) || die "mktemp failed"
trap 'chmod -R u+rwx "$run"; rm -rf "$run"' EXIT
chmod 755 "$run"
mkdir -p "$run"/{gnu,aiscp}/src "$run"/{logs,status,runtime} && chmod 1777 "$run"/{gnu,aiscp}
ln -s /usr/bin/cp "$run/gnu/src/cp"
install -m 755 "$bin" "$run/aiscp/src/cp"
for who in gnu aiscp; do ln -s "$(command -v install)" "$run/$who/src/ginstall"; done
if [[ $fake == 1 ]]; then
  profile=debug
  [[ $bin == */release/* ]] && profile=release
  (cd "$repo" && cargo build -q -p fake-gpu --profile "${profile/debug/dev}") ||
    die "cannot build the fake GPU library"
  install -m 644 "$repo/target/$profile/libfake_gpu.so" "$run/libfake_gpu.so"
  export AISCP_BACKEND=hipfile AISCP_HIPFILE_LIB=$run/libfake_gpu.so AISCP_HIP_LIB=$run/libfake_gpu.so
fi
# Tests grep config.h for how cp was built: Debian's cp has ACL, xattr and SELinux support.
printf '#define %s 1\n' USE_ACL USE_XATTR HAVE_CAP HAVE_SELINUX_SELINUX_H HAVE_LINKAT \
  HAVE_UTIMENSAT HAVE_LUTIMES HAVE_OPENAT >"$run/config.h"

# The environment `make check` gives a test, plus AISCP_* and GNU_CP_TESTS_PASSENV's
# variables (ignored by GNU cp).
sys_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
built=$(for p in $(sh "$src/build-aux/gen-lists-of-programs.sh" --list-progs); do
  [[ $p == ginstall ]] || PATH=$sys_path command -v "$p" >/dev/null && echo "$p"; done | xargs)
test_env=(LC_ALL=C TMPDIR=/tmp VERSION="${ver%%-*}" PACKAGE_VERSION="${ver%%-*}"
  abs_srcdir="$src" abs_top_srcdir="$src" srcdir="$src" built_programs="$built"
  CONFIG_HEADER="$run/config.h" fail=0 host_os=linux-gnu LOCALE_FR=none LOCALE_FR_UTF8=none
  AWK=awk EGREP="grep -E" MAKE=make PERL=perl SHELL=/bin/bash CC=cc EXEEXT=
  RUN_EXPENSIVE_TESTS=yes RUN_VERY_EXPENSIVE_TESTS=yes VERBOSE=yes)
for v in ${GNU_CP_TESTS_PASSENV:-} $(compgen -e | grep '^AISCP_'); do
  [[ -n ${!v+set} ]] && test_env+=("$v=${!v}")
done
# Each test's aiscp is kept from this machine's staging service, as the suite's are: a
# service at the default socket would take its copies, and another user's /tmp/aiscp-UID
# would add a warning to each run. Under scripts/through-service.sh, going through its
# service is the point: its XDG_RUNTIME_DIR (where the socket is) is handed on instead.
through_service=0
[[ ${AISCP_TESTS_THROUGH_SERVICE:-} == 1 && -n ${XDG_RUNTIME_DIR:-} ]] && through_service=1
if [[ $through_service == 1 ]]; then
  test_env+=("XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR")
else
  test_env+=(AISCP_SERVICE=off)
fi
# existing-perm-race wants a user in two groups: root may chgrp to any.
[[ $root == 1 ]] && test_env+=("COREUTILS_GROUPS=0 $(getent group nogroup | cut -d: -f3)")

# run_one WHO TEST: tests/TEST.sh with WHO's cp (as nobody where it must not run as root),
# with a runtime directory of its own (XDG_RUNTIME_DIR, mode 0700, of whoever runs it); its
# exit status goes to status/WHO-TEST.
run_one() {
  local who=$1 t=$2 as=() own=()
  grep -q '^skip_if_root_' "$src/tests/$t.sh" && [[ $root == 1 ]] &&
    as=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  if [[ $through_service == 0 ]]; then
    local rt=$run/runtime/$who-${t//\//-}
    mkdir -m 700 "$rt" && { [[ ${#as[@]} == 0 ]] || chown nobody:nogroup "$rt"; }
    own=(XDG_RUNTIME_DIR="$rt")
  fi
  (cd "$run/$who" && env -i HOME="$run/$who" PATH="$run/$who/src:$sys_path" \
    abs_top_builddir="$run/$who" CU_TEST_NAME="$t" "${test_env[@]}" "${own[@]}" \
    "${as[@]}" timeout -k 10 "$limit" bash "$src/tests/$t.sh" \
    </dev/null >"$run/logs/$who-${t//\//-}.log" 2>&1)
  echo $? >"$run/status/$who-${t//\//-}"
}

tests=$(cd "$src/tests" && { ls cp/*.sh; grep -l '^print_ver_ .*\<cp\>' */*.sh; } |
  sed 's/\.sh$//' | sort -u | grep -E -- "$filter") || die "no test matches '$filter'"
note "$(wc -w <<<"$tests") test(s), with GNU cp, then with $bin${AISCP_BACKEND:+ (AISCP_BACKEND=$AISCP_BACKEND)}"
for who in gnu aiscp; do
  for t in $tests; do
    while (($(jobs -pr | wc -l) >= parallel)); do wait -n; done
    run_one "$who" "$t" &
  done
  wait
done

logs=$cache/logs
rm -rf "$logs" && cp -r "$run/logs" "$logs"
pass=0 fail=0 skip=0 known=0
for t in $tests; do
  name=${t//\//-}
  g=$(cat "$run/status/gnu-$name") a=$(cat "$run/status/aiscp-$name")
  why=$(printf '%s\n' "${DIFFERS_ON_PURPOSE[@]}" | sed -n "s|^$t: ||p")
  if [[ $g != 0 ]]; then
    echo "SKIP $t"; skip=$((skip + 1))          # GNU cp does not pass it here
  elif [[ $a == 0 ]]; then
    echo "PASS $t"; pass=$((pass + 1))
    [[ -n $why ]] && note "$t passes: take it off DIFFERS_ON_PURPOSE"
  elif [[ -n $why ]]; then
    echo "KNOWN $t"; known=$((known + 1)); note "$t: differs on purpose: $why"
  else
    echo "FAIL $t"; fail=$((fail + 1)); note "$t: exit $a; log: $logs/aiscp-$name.log"
  fi
done
echo "gnu cp tests: $pass passed, $fail failed, $known known differences, $skip skipped (GNU cp does not pass them here)"
[[ $fail == 0 ]]
