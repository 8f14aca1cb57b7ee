#!/usr/bin/env bash
# Build (or reuse) the metaroce test kernel and print its build directory.
#
#   qemu/build-kernel.sh            # normal flavour
#   METAROCE_KERNEL=debug qemu/build-kernel.sh   # + KASAN, lockdep, kmemleak, UBSAN
#
# The kernel is Debian's linux-source-6.12, x86_64 defconfig + kvm_guest.config +
# qemu/kernel.config (+ qemu/kernel-debug.config), built with LLVM=1 out of tree into
#   $METAROCE_CACHE/kernel/<version>-<flavour>-<key>/
# where <key> hashes everything that decides the result: the kernel version, the
# fragments, the recipe number below and the rustc/clang/bindgen versions.
# A second run with nothing changed is instant.
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

  case "$flavour" in
    normal) fragments=("$here/kernel.config") ;;
    debug)  fragments=("$here/kernel.config" "$here/kernel-debug.config") ;;
    *) echo "METAROCE_KERNEL must be 'normal' or 'debug', not '$flavour'" >&2; exit 2 ;;
  esac

  [[ -f $tarball ]] || { echo "$tarball missing: run tools/setup.sh" >&2; exit 1; }
  version=$(dpkg-query -W -f='${Version}' linux-source-6.12)
  version=${version//[^A-Za-z0-9.+-]/_}   # 6.12.117-1~deb12u1 -> ..._deb12u1 (vng refuses '~')
  # Bump when the build steps below change what gets built.
  recipe=1
  key=$( { echo "$version recipe $recipe"; cat "${fragments[@]}"; rustc --version;
           clang --version | head -1; bindgen --version; } | sha256sum | cut -c1-12)
  src=$cache/src/linux-source-$version
  out=$cache/kernel/$version-$flavour-$key

  if [[ -f $out/.metaroce-done ]]; then
    echo "[kernel] cached: $out" >&2
    echo "$out"; exit 0
  fi

  mkdir -p "$cache/src" "$cache/kernel"
  # One build at a time per cache (two checkouts may share it).
  exec 9>"$cache/.build.lock"
  flock 9
  if [[ -f $out/.metaroce-done ]]; then echo "$out"; exit 0; fi
  if [[ ! -f $src/.unpacked ]]; then
    echo "[kernel] unpacking $tarball" >&2
    rm -rf "$src" && mkdir -p "$src"
    tar -xf "$tarball" -C "$src" --strip-components=1
    touch "$src/.unpacked"
  fi

  # Only one tree per flavour is kept: drop trees built from other inputs.
  for d in "$cache"/kernel/*-"$flavour"-*; do
    [[ -d $d && $d != "$out" ]] && { echo "[kernel] removing stale $d" >&2; rm -rf "$d"; }
  done
  rm -rf "$out" && mkdir -p "$out"
  log=$out/build.log
  echo "[kernel] configuring $flavour in $out" >&2
  mk() { make -C "$src" O="$out" LLVM=1 "$@"; }
  {
    mk defconfig
    "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" \
        "$src/kernel/configs/kvm_guest.config" "${fragments[@]}"
    mk olddefconfig
    mk rustavailable
  } >>"$log" 2>&1 || { tail -30 "$log" >&2; exit 1; }

  # Every option the fragments ask for must have survived olddefconfig.
  bad=0
  while IFS= read -r line; do
    [[ $line =~ ^(CONFIG_[A-Z0-9_]+)=(.*)$ ]] || continue
    opt=${BASH_REMATCH[1]} want=${BASH_REMATCH[2]}
    if [[ $want == n ]]; then
      grep -q "^$opt=" "$out/.config" && { echo "[kernel] $opt wanted n, got $(grep "^$opt=" "$out/.config")" >&2; bad=1; }
    else
      grep -qx "$opt=$want" "$out/.config" || { echo "[kernel] $opt wanted $want, got '$(grep "^$opt=" "$out/.config" || echo unset)'" >&2; bad=1; }
    fi
  done < <(cat "${fragments[@]}")
  ((bad == 0)) || { echo "[kernel] config check failed (see above)" >&2; exit 1; }

  echo "[kernel] building (cold: ~20 min on 2 cores; log: $log)" >&2
  start=$SECONDS
  if ! mk -j"$jobs" bzImage modules >>"$log" 2>&1; then
    grep -E 'error|Error' "$log" | tail -20 >&2; exit 1
  fi
  echo "[kernel] built in $((SECONDS - start)) s" >&2
  touch "$out/.metaroce-done"
  echo "$out"
}
main "$@"
