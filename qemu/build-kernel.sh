#!/usr/bin/env bash
# Build (or reuse) the metaroce test kernel and print its build directory.
#
#   qemu/build-kernel.sh            # normal flavour
#   METAROCE_KERNEL=debug qemu/build-kernel.sh   # + KASAN, lockdep, kmemleak, UBSAN
#   qemu/build-kernel.sh --config-only   # configure and check the .config only (seconds)
#
# The kernel is Debian's linux-source-6.12, x86_64 `allnoconfig` +
# kernel/configs/kvm_guest.config + qemu/kernel-base.config (a virtme-ng guest) +
# qemu/kernel.config (what the tests need) (+ qemu/kernel-debug.config), built
# with LLVM=1 out of tree into
#   $METAROCE_CACHE/kernel/<version>-<flavour>-<key>/
# where <key> hashes everything that decides the result: the kernel version, the
# fragments, the recipe number below and the rustc/clang/bindgen versions.
# A second run with nothing changed is instant. Every line of the fragments
# must hold in the final .config (a dependency Kconfig did not meet fails).
# Progress goes to stderr and to <dir>/build.log; the only stdout line is the directory.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# All in a function: bash parses it whole, so editing this file while a build
# runs cannot derail the running build.
main() {

  export PATH="${HOME:-/root}/.cargo/bin:$PATH"
  flavour=${METAROCE_KERNEL:-normal}
  cache=${METAROCE_CACHE:-/var/cache/metaroce}
  tarball=/usr/src/linux-source-6.12.tar.xz
  jobs=${JOBS:-$(nproc)}
  config_only=0
  [[ ${1:-} == --config-only ]] && config_only=1

  case "$flavour" in
    normal) fragments=("$here/kernel-base.config" "$here/kernel.config") ;;
    debug)  fragments=("$here/kernel-base.config" "$here/kernel.config" "$here/kernel-debug.config") ;;
    *) echo "METAROCE_KERNEL must be 'normal' or 'debug', not '$flavour'" >&2; exit 2 ;;
  esac

  [[ -f $tarball ]] || { echo "$tarball missing: run tools/setup.sh" >&2; exit 1; }
  version=$(dpkg-query -W -f='${Version}' linux-source-6.12)
  version=${version//[^A-Za-z0-9.+-]/_}   # 6.12.117-1~deb12u1 -> ..._deb12u1 (vng refuses '~')
  # Bump when the build steps below change what gets built.
  # 2: allnoconfig + kernel-base.config instead of defconfig.
  recipe=2
  key=$( { echo "$version recipe $recipe"; cat "${fragments[@]}"; rustc --version;
           clang --version | head -1; bindgen --version; } | sha256sum | cut -c1-12)
  src=$cache/src/linux-source-$version
  out=$cache/kernel/$version-$flavour-$key

  if [[ -f $out/.metaroce-done ]] && ((!config_only)); then
    echo "[kernel] cached: $out" >&2
    echo "$out"; exit 0
  fi

  mkdir -p "$cache/src" "$cache/kernel"
  # One build at a time per cache (two checkouts may share it); a
  # --config-only check needs only the unpacked source.
  exec 9>"$cache/.build.lock"
  ((config_only)) && [[ -f $src/.unpacked ]] || flock 9
  if [[ -f $out/.metaroce-done ]] && ((!config_only)); then echo "$out"; exit 0; fi
  if [[ ! -f $src/.unpacked ]]; then
    echo "[kernel] unpacking $tarball" >&2
    rm -rf "$src" && mkdir -p "$src"
    tar -xf "$tarball" -C "$src" --strip-components=1
    touch "$src/.unpacked"
  fi

  if ((config_only)); then
    # A scratch tree beside the real ones: nothing cached is touched.
    out=$cache/kernel/config-check-$flavour-$$
    rm -rf "$out" && mkdir -p "$out"
  else
    # Only one tree per flavour is kept: drop trees built from other inputs.
    for d in "$cache"/kernel/*-"$flavour"-*; do
      [[ -d $d && $d != "$out" ]] && { echo "[kernel] removing stale $d" >&2; rm -rf "$d"; }
    done
    rm -rf "$out" && mkdir -p "$out"
  fi
  log=$out/build.log
  echo "[kernel] configuring $flavour in $out" >&2
  mk() { make -C "$src" O="$out" LLVM=1 "$@"; }
  {
    mk allnoconfig
    "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" \
        "$src/kernel/configs/kvm_guest.config" "${fragments[@]}"
    mk olddefconfig
    mk rustavailable
  } >>"$log" 2>&1 || { tail -30 "$log" >&2; exit 1; }

  # Every line of the fragments must have survived olddefconfig: "=n" and
  # "# CONFIG_X is not set" mean unset, anything else the exact value. A later
  # fragment's line for the same option replaces an earlier one, as in
  # merge_config.sh.
  bad=0
  declare -A want=()
  order=()
  while IFS= read -r line; do
    if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
      opt=${BASH_REMATCH[1]} val=${BASH_REMATCH[2]}
    elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
      opt=${BASH_REMATCH[1]} val=n
    elif [[ $line =~ ^[[:space:]]*(#|$) ]]; then
      continue
    else
      echo "[kernel] not a config line: '$line'" >&2; bad=1; continue
    fi
    [[ -n ${want[$opt]:-} ]] || order+=("$opt")
    want[$opt]=$val
  done < <(cat "${fragments[@]}")
  for opt in "${order[@]}"; do
    have=$(grep -m1 "^$opt=" "$out/.config" | cut -d= -f2- || true)
    if [[ ${want[$opt]} == n ]]; then
      [[ -z $have ]] || { echo "[kernel] $opt wanted n, got $have" >&2; bad=1; }
    else
      [[ $have == "${want[$opt]}" ]] || { echo "[kernel] $opt wanted ${want[$opt]}, got '${have:-unset}'" >&2; bad=1; }
    fi
  done
  if ((config_only)); then
    cp "$out/.config" "$cache/kernel/config-check-$flavour.config"; rm -rf "$out"
    out=$cache/kernel/config-check-$flavour.config
  fi
  ((bad == 0)) || { echo "[kernel] config check failed (see above; $out)" >&2; exit 1; }
  echo "[kernel] config check: all ${#order[@]} options of the fragments hold in $out" >&2
  if ((config_only)); then echo "$out"; exit 0; fi

  echo "[kernel] building (cold: ~10 min on 2 cores; log: $log)" >&2
  start=$SECONDS
  echo "[kernel] build started $(date -u +%FT%TZ), -j$jobs" >>"$log"
  if ! mk -j"$jobs" bzImage modules >>"$log" 2>&1; then
    grep -E 'error|Error' "$log" | tail -20 >&2; exit 1
  fi
  echo "[kernel] built in $((SECONDS - start)) s" | tee -a "$log" >&2
  touch "$out/.metaroce-done"
  echo "$out"
}
main "$@"
