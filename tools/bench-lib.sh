# Sourced by tools/bench.sh and tools/bench-pool.sh.
#
# vm_rundir LOG NAME: the run directory that qemu/vm-run's start line in LOG
# names, "[vm-run] NAME: N guest(s), TCG|KVM, limit Ns, logs DIR" (the last
# such line), or nothing. Every field before DIR is matched, so DIR may hold
# anything, " logs " included.
vm_rundir() {
  sed -n "s/^\[vm-run\] $2: [0-9]* guest(s), [A-Z]*, limit [0-9]*s, logs \(.*\)\$/\1/p" -- "$1" | tail -n 1
}
