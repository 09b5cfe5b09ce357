#!/usr/bin/env bash
# Runs a command in a fresh network namespace whose loopback is rate-limited with tc,
# so that MPI ranks on this machine talk over TCP at a chosen rate (a stand-in for a
# slow network when one machine must play a cluster). Needs root and `ip netns`.
#
#   tools/limited_network.sh [--burst BYTES] RATE COMMAND...        e.g. RATE = 1gbit
#
# The shaper is a token bucket (tc's tbf) whose depth, --burst, is what an idle link may
# send above the rate; by default the least that keeps the rate and passes the
# loopback's 64 KiB packets (tools/tbf_burst.sh: 65 KiB up to 2 Gbit/s, 0.25 ms of the
# rate above). Until 2026-12-02 it was 256 KiB,
# and the benchmark figures of docs/performance.md recorded before then ran on that.
#
# Inside, Open MPI must use TCP on lo (not shared memory), e.g.
#   mpirun --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo ...
# The namespace is removed on exit, whatever happens.
set -euo pipefail
usage() { echo "usage: $0 [--burst BYTES] RATE COMMAND..." >&2; exit 2; }
burst=""
if [ "${1:-}" = --burst ]; then
  [ $# -ge 2 ] && [ -n "$2" ] || usage
  burst=$2; shift 2
fi
[ $# -ge 2 ] || usage
rate=$1; shift
if [ "$(id -u)" -ne 0 ]; then echo "limited_network.sh: needs root (ip netns, tc)" >&2; exit 2; fi
command -v ip >/dev/null || { echo "limited_network.sh: ip (iproute2) not found" >&2; exit 2; }
ns="axonn_lim_$$"
ip netns add "$ns" || { echo "limited_network.sh: cannot create a network namespace" >&2; exit 2; }
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT INT TERM
ip netns exec "$ns" ip link set lo up
if [ -z "$burst" ]; then  # the default: at least the namespace's loopback packets
  . "$(dirname "${BASH_SOURCE[0]}")/tbf_burst.sh"
  burst=$(tbf_burst "$rate" "$(ip netns exec "$ns" cat /sys/class/net/lo/mtu)") || exit 2
fi
ip netns exec "$ns" tc qdisc add dev lo root tbf rate "$rate" burst "$burst" latency 100ms
ip netns exec "$ns" "$@"
