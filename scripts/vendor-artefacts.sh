#!/usr/bin/env bash
# Fetches the genuine vendor artefacts the ABI checks run against, into DIR (default
# target/vendor), without touching the system:
#   - PyPI rocm-bindings-systems (AMD's hipFile wrappers, built against hipfile.h 0.4.0) and
#     nvidia-cufile (libcufile.so.0 and cufile.h of cuFile 1.19), nvidia-cuda-nvrtc-cu12
#     (libnvrtc.so.12 of CUDA 12.9, which compiles the digest kernels without a GPU), with
#     pip --target;
#   - Debian's newest HIP runtimes, libamdhip64-5 5.7 (trixie) and libamdhip64-6 6.4 (sid),
#     each unpacked with its dependencies (their own glibc included: they need glibc 2.38,
#     bookworm has 2.36) by apt-get download with a private apt state, and dpkg -x.
# Writes DIR/env.sh, which exports where they are for the tests:
#   AISCP_VENDOR_CUFILE_LIB      the genuine libcufile.so.0 (tests/it/vendor_cufile.rs), and
#   HIPFILE_RS_VENDOR_CUFILE_LIB the same for hipfile-rs (src/load.rs)
#   HIPFILE_RS_VENDOR_NVRTC_LIB  the genuine libnvrtc.so.12 (hipfile-rs loading tests)
#   HIPFILE_RS_VENDOR_HIP_ROOTS  the unpacked roots, ':'-separated (hipfile-rs loading tests)
#   VENDOR_PY_SITE               the pip --target directory (scripts/abi-check.py --site)
# Exit status: 0 when everything is there; 3 when a registry cannot be reached (the reason is
# printed, and env.sh names only what was fetched); 1 on any other failure.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(realpath -m "${1:-target/vendor}")
mkdir -p "$dir"
env_file="$dir/env.sh"
: >"$env_file"
unreachable=0

reachable() { # URL: whether an HTTP(S) GET answers at all
  python3 - "$1" <<'EOF'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=20).close()
except Exception as e:
    print(f"{sys.argv[1]}: {e}", file=sys.stderr)
    sys.exit(1)
EOF
}

# --- PyPI -----------------------------------------------------------------------------------
site="$dir/py"
pins=(rocm-bindings-systems==10.0.0.0.1.2 nvidia-cufile==1.19.1.55 nvidia-cuda-nvrtc-cu12==12.9.86)
if [ -f "$site/.installed" ] && [ "$(cat "$site/.installed")" = "${pins[*]}" ]; then
  :
elif rm -rf "$site" && python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  --no-warn-script-location --target "$site" "${pins[@]}"; then
  echo "${pins[*]}" >"$site/.installed"
else
  index=${PIP_INDEX_URL:-https://pypi.org/simple/}
  if reachable "$index"; then
    echo "vendor-artefacts: pip could not install ${pins[*]} although $index answers" >&2
    exit 1
  fi
  echo "skipped: PyPI ($index) cannot be reached: no hipFile/cuFile ABI check" >&2
  unreachable=1
  rm -rf "$site"
fi
if [ -d "$site" ]; then
  cufile=$(find "$site/nvidia" -name libcufile.so.0 | head -1)
  [ -n "$cufile" ] || { echo "vendor-artefacts: no libcufile.so.0 in nvidia-cufile" >&2; exit 1; }
  nvrtc=$(find "$site/nvidia" -name libnvrtc.so.12 | head -1)
  [ -n "$nvrtc" ] || { echo "vendor-artefacts: no libnvrtc.so.12 in nvidia-cuda-nvrtc-cu12" >&2; exit 1; }
  printf 'export VENDOR_PY_SITE=%q\nexport AISCP_VENDOR_CUFILE_LIB=%q\nexport HIPFILE_RS_VENDOR_CUFILE_LIB=%q\nexport HIPFILE_RS_VENDOR_NVRTC_LIB=%q\n' \
    "$site" "$cufile" "$cufile" "$nvrtc" \
    >>"$env_file"
fi

# --- Debian ---------------------------------------------------------------------------------
apt_dir="$dir/apt"
mirror=http://deb.debian.org/debian
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
printf 'deb %s trixie main\ndeb %s sid main\n' "$mirror" "$mirror" >"$apt_dir/sources.list"
apt_opts=(-q -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
  -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
  -o APT::Sandbox::User=root)
roots=()
fetch_root() { # RELEASE PACKAGE: unpack PACKAGE and everything it depends on from RELEASE
  local release=$1 package=$2 root="$apt_dir/$1/root" debs
  if [ -e "$root/.unpacked" ]; then roots+=("$root"); return; fi
  local opts=("${apt_opts[@]}" -o "APT::Default-Release=$release")
  debs=$(apt-cache "${opts[@]}" depends --recurse --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances "$package" |
    grep -v '^ ' | grep -v '<' | sort -u)
  rm -rf "$apt_dir/$release" && mkdir -p "$root"
  # shellcheck disable=SC2086 # one package name per word
  (cd "$apt_dir/$release" && apt-get "${opts[@]}" download $debs >/dev/null)
  for deb in "$apt_dir/$release"/*.deb; do dpkg -x "$deb" "$root"; done
  rm -f "$apt_dir/$release"/*.deb
  touch "$root/.unpacked"
  roots+=("$root")
}
if apt-get "${apt_opts[@]}" update >/dev/null 2>"$apt_dir/update.err"; then
  fetch_root trixie libamdhip64-5
  fetch_root unstable libamdhip64-6
  printf 'export HIPFILE_RS_VENDOR_HIP_ROOTS=%q\n' "$(IFS=:; echo "${roots[*]}")" >>"$env_file"
elif reachable "$mirror/dists/trixie/Release"; then
  echo "vendor-artefacts: apt-get update failed although $mirror answers:" >&2
  cat "$apt_dir/update.err" >&2
  exit 1
else
  echo "skipped: the Debian mirror ($mirror) cannot be reached: no check against HIP 5.7/6.4" >&2
  unreachable=1
fi

[ "$unreachable" -eq 0 ] || exit 3
