#!/usr/bin/env bash
# An emulated multi-node cluster on one machine: N "nodes" are Linux network
# namespaces, each joined by a veth link to a bridge, each node's link rate-limited
# (and optionally delayed) with tc; an MPI job runs GPUS_PER_NODE ranks in every node.
# Ranks of one node talk through shared memory, ranks of different nodes through TCP
# over the limited links, so placement matters for real.
#
#   tools/emulated_cluster.sh --nodes 2 --gpus-per-node 2 --rate 400mbit [--delay 1ms] [--burst BYTES] \
#       [--core-share CORES [--core-period-us US]] -- PROGRAM [ARGS...]
#
# By default the ranks share the machine's cores as the kernel schedules them: a rank
# that waits leaves its time to the others. --core-share gives each rank a fixed share
# instead, as a GPU is its rank's alone: CORES of a core (e.g. 0.22) in every period of
# --core-period-us microseconds (default 5000), enforced by the kernel's CFS bandwidth
# control in a cgroup of the rank's own (cgroup v1's cpu controller at
# /sys/fs/cgroup/cpu); what a waiting rank leaves unused is lost, not lent.
#
# The rate is a token bucket (tc's tbf) whose depth, --burst, is what an idle link may
# send above the rate. A real link has none: its line rate is all it carries. The default
# is the bytes the rate carries in 0.25 ms, at least 8 KiB (8 KiB at 200mbit), the least
# that keeps the rate (docs/validation.md, "The emulator's token bucket"). Until
# 2026-12-02 it was 256 KiB: every transfer after 10 ms idle passed its first 256 KiB
# at once, and most of the model's tensor collectives are smaller than that.
#
# runs `mpirun -np NODES*GPUS_PER_NODE PROGRAM ARGS` with ranks filling node 0 first.
# Everything it creates is removed on exit (trap), whatever happens. Needs root,
# `ip netns`, tc and Open MPI. Addresses: 198.18.77.0/24 (RFC 2544 benchmarking range), inside the
# namespaces this script creates; the bridge (host side) is 198.18.77.254.
set -euo pipefail

nodes=2 gpn=2 rate="" delay="" burst="" share="" period_us="" mpirun_extra=()
usage() { echo "usage: $0 --nodes N --gpus-per-node G --rate RATE [--delay D] [--burst BYTES] [--core-share CORES [--core-period-us US]] [--mpirun-arg ARG]... -- PROGRAM [ARGS...]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --gpus-per-node) gpn=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --core-share) share=$2; shift 2 ;;
    --core-period-us) period_us=$2; shift 2 ;;
    --mpirun-arg) mpirun_extra+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ $# -ge 1 ] && [ -n "$rate" ] || usage
[[ "$nodes" =~ ^[1-9][0-9]*$ && "$nodes" -le 32 && "$gpn" =~ ^[1-9][0-9]*$ ]] || { echo "emulated_cluster: --nodes 1..32 and --gpus-per-node >= 1" >&2; exit 2; }
# The bucket's depth: --burst as given, else 0.25 ms of the rate (tools/tbf_burst.sh).
if [ -z "$burst" ]; then
  . "$(dirname "${BASH_SOURCE[0]}")/tbf_burst.sh"
  # 1500: the veth's MTU, the largest packet the bucket must hold
  burst=$(tbf_burst "$rate" 1500) || exit 2
fi
if [ "$(id -u)" -ne 0 ]; then echo "emulated_cluster: needs root (ip netns, tc)" >&2; exit 2; fi
cgroups=/sys/fs/cgroup/cpu
[ -n "$share" ] || [ -z "$period_us" ] || { echo "emulated_cluster: --core-period-us needs --core-share" >&2; exit 2; }
if [ -n "$share" ]; then
  period_us=${period_us:-5000}
  [[ "$period_us" =~ ^[1-9][0-9]*$ && "$period_us" -ge 1000 && "$period_us" -le 1000000 ]] ||
    { echo "emulated_cluster: --core-period-us $period_us: expected microseconds, 1000 to 1000000" >&2; exit 2; }
  # the quota in microseconds per period; the kernel takes at least 1000
  quota_us=$(awk -v s="$share" -v p="$period_us" 'BEGIN { if (s !~ /^[0-9]*\.?[0-9]+$/ || s <= 0) exit 1; printf "%d", s * p + 0.5 }') &&
    [ "$quota_us" -ge 1000 ] ||
    { echo "emulated_cluster: --core-share $share: expected cores per rank above 0, at least 1000 us per --core-period-us ($period_us)" >&2; exit 2; }
  [ -w "$cgroups/cgroup.procs" ] && [ -e "$cgroups/cpu.cfs_quota_us" ] ||
    { echo "emulated_cluster: --core-share needs cgroup v1's cpu controller, writable, at $cgroups" >&2; exit 2; }
fi
command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || { echo "emulated_cluster: ip netns is unavailable" >&2; exit 2; }
command -v tc >/dev/null || { echo "emulated_cluster: tc is unavailable" >&2; exit 2; }
MPIRUN=$(command -v mpirun) || { echo "emulated_cluster: mpirun not found" >&2; exit 2; }

id=$$
tag="ax${id}"
work=$(mktemp -d "/tmp/axonn_cluster_${id}_XXXX")
bridge="${tag}br"
mpirun_pid=""
ranks_cgroup="$cgroups/axonn_cluster_${id}"  # with --core-share: a cgroup per rank inside it
cleanup() {
  [ -z "$mpirun_pid" ] || kill "$mpirun_pid" 2>/dev/null || true
  for ((i = 0; i < nodes; i++)); do
    # daemons left in a namespace would keep it (and its link) alive
    pids=$(ip netns pids "${tag}n$i" 2>/dev/null || true)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
    ip link del "${tag}h$i" 2>/dev/null || true  # the host end; its peer goes with it
    ip netns del "${tag}n$i" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  if [ -n "$share" ] && [ -d "$ranks_cgroup" ]; then
    for d in "$ranks_cgroup"/rank*; do
      [ -d "$d" ] || continue
      for pid in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
      for _ in $(seq 20); do rmdir "$d" 2>/dev/null && break; sleep 0.1; done
    done
    rmdir "$ranks_cgroup" 2>/dev/null || true
  fi
  # the cgroup hierarchy's bind (--core-share) first; --one-file-system: never into it
  ! mountpoint -q "$work/cgcpu" 2>/dev/null || umount "$work/cgcpu" 2>/dev/null || umount -l "$work/cgcpu" 2>/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT INT TERM

ip link add "$bridge" type bridge
ip addr add 198.18.77.254/24 dev "$bridge"
ip link set "$bridge" up
hosts=""
for ((i = 0; i < nodes; i++)); do
  ns="${tag}n$i" addr="198.18.77.$((i + 1))"
  ip netns add "$ns"
  ip link add "${tag}h$i" type veth peer name "${tag}v$i"
  ip link set "${tag}h$i" master "$bridge" up
  ip link set "${tag}v$i" netns "$ns"
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip link set "${tag}v$i" name eth0
  ip netns exec "$ns" ip addr add "$addr/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  # the node's injection bandwidth (and optional latency), on its egress
  if [ -n "$delay" ]; then
    ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: netem delay "$delay"
    ip netns exec "$ns" tc qdisc add dev eth0 parent 1: handle 2: tbf rate "$rate" burst "$burst" latency 100ms
  else
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
  fi
  mkdir -p "$work/shm$i"
  hosts+="$addr slots=$gpn"$'\n'
  echo "$addr $ns $work/shm$i" >>"$work/nodes"
done
printf '%s' "$hosts" >"$work/hostfile"

# Start only when every link is up and every bridge port forwards (3): a daemon that
# connects before its link carries traffic can leave mpirun waiting.
for ((i = 0; i < nodes; i++)); do
  for _ in $(seq 50); do
    [ "$(cat /sys/class/net/${tag}h$i/brport/state 2>/dev/null)" = 3 ] &&
      [ "$(ip netns exec "${tag}n$i" cat /sys/class/net/eth0/operstate)" = up ] && break
    sleep 0.1
  done
done

# --core-share: every rank starts in a cgroup of its own, with its quota. `ip netns exec`
# gives a node's processes a /sys without the cgroups, so the agent binds this view of
# the cpu controller's hierarchy there (in the node's own mount namespace; a bind, not a
# new mount, which cgroup v1 refuses where cpu shares a hierarchy with cpuacct) before
# its daemon starts: the ranks join their cgroups, and read their quota (axrun,
# calibrate), as on a machine of their own, at the paths this script cleans up.
node_setup=""
if [ -n "$share" ]; then
  mkdir "$ranks_cgroup" "$work/cgcpu"
  mount --bind "$cgroups" "$work/cgcpu"
  node_setup="mount -t tmpfs axonn_cgroups /sys/fs/cgroup && mkdir /sys/fs/cgroup/cpu && mount --bind $work/cgcpu /sys/fs/cgroup/cpu && "
  cat >"$work/rank" <<RANK
#!/usr/bin/env bash
d="$ranks_cgroup/rank\${OMPI_COMM_WORLD_RANK:?emulated_cluster: not started by mpirun}"
mkdir "\$d" && echo $period_us >"\$d/cpu.cfs_period_us" && echo $quota_us >"\$d/cpu.cfs_quota_us" &&
  echo \$\$ >"\$d/cgroup.procs" || { echo "emulated_cluster: cannot give rank \$OMPI_COMM_WORLD_RANK its core share in \$d" >&2; exit 2; }
exec "\$@"
RANK
  chmod +x "$work/rank"
  set -- "$work/rank" "$@"
fi

# Open MPI's launch agent: "agent HOST COMMAND..." runs COMMAND inside HOST's namespace,
# with its own shared-memory backing directory and session directory: the nodes share
# this machine's hostname and file system, so ranks of different nodes would meet in
# /dev/shm, and daemons in /tmp/ompi.HOST.* (where a daemon starting at the same time
# as another has died, leaving mpirun waiting for it).
cat >"$work/agent" <<AGENT
#!/usr/bin/env bash
host=\$1; shift
while read -r addr ns shm; do
  if [ "\$addr" = "\$host" ]; then
    exec ip netns exec "\$ns" env OMPI_MCA_btl_vader_backing_directory="\$shm" OMPI_MCA_orte_tmpdir_base="\$shm" \
      sh -c "$node_setup\$*"
  fi
done <"$work/nodes"
echo "emulated_cluster agent: unknown host \$host" >&2; exit 1
AGENT
chmod +x "$work/agent"

# The nodes share this machine's cores: waiting ranks yield the CPU (mpi_yield_when_idle;
# Open MPI would busy-poll, since each node's slots are not oversubscribed), or ranks
# that wait starve the ones that compute and the ones that move data. No binding: each
# node's daemon binds as if it had the machine to itself, so with Open MPI's default
# for 2 ranks or fewer (a core each) the ranks of every node land on core 0. The rsh
# launcher by name: an environment's OMPI_MCA_plm=isolated (a container image's, for
# one-machine jobs) starts no daemon in the other nodes, and mpirun then finds "All nodes
# which are allocated for this job are already filled".
# About one launch in a dozen has left mpirun waiting for a node's daemon that never
# started (the node's namespace stays empty). A watchdog relaunches such a job (at most
# twice): every node must have its daemon within 30 s, unless mpirun has ended by then.
launch() {
  "$MPIRUN" --allow-run-as-root --oversubscribe -np $((nodes * gpn)) --hostfile "$work/hostfile" --map-by slot --bind-to none \
    --mca plm rsh --mca plm_rsh_agent "$work/agent" --mca plm_rsh_no_tree_spawn 1 --mca mpi_yield_when_idle 1 \
    --mca btl self,vader,tcp --mca btl_tcp_if_include 198.18.77.0/24 --mca oob_tcp_if_include 198.18.77.0/24 \
    "${mpirun_extra[@]}" "$@" &
  mpirun_pid=$!
}
daemons_started() {  # an orted alive in every node
  for ((i = 0; i < nodes; i++)); do
    found=0
    for pid in $(ip netns pids "${tag}n$i" 2>/dev/null); do
      [ "$(cat /proc/$pid/comm 2>/dev/null)" = orted ] && { found=1; break; }
    done
    [ $found -eq 1 ] || return 1
  done
}
for attempt in 1 2 3; do
  launch "$@"
  started=0
  for _ in $(seq 300); do
    daemons_started && { started=1; break; }
    kill -0 "$mpirun_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ $started -eq 0 ] && kill -0 "$mpirun_pid" 2>/dev/null && [ $attempt -lt 3 ]; then
    echo "emulated_cluster: a node's MPI daemon did not start within 30 s; relaunching (attempt $((attempt + 1)))" >&2
    kill "$mpirun_pid" 2>/dev/null; wait "$mpirun_pid" 2>/dev/null || true
    for ((i = 0; i < nodes; i++)); do
      pids=$(ip netns pids "${tag}n$i" 2>/dev/null || true)
      [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
    done
    continue
  fi
  set +e
  wait "$mpirun_pid"
  rc=$?
  set -e
  mpirun_pid=""
  exit $rc
done
