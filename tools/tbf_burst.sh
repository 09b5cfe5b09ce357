# The depth of a tc token bucket (tbf's burst) that keeps a link to its rate: the bytes
# the rate carries in 0.25 ms, at least 8 KiB (8 KiB at 200 Mbit/s, 31 KB at 1 Gbit/s),
# and at least the device's largest packet (MTU_BYTES and 1 KiB for headers): tbf drops
# a packet its bucket cannot hold, and TCP then stalls until it times out (a loopback's
# 64 KiB packets did at 1 Gbit/s).
# A deeper bucket lets an idle link pass its first bytes at once (docs/validation.md,
# "The emulator's token bucket"). Sourced by tools/emulated_cluster.sh and
# tools/limited_network.sh.
#
# A rate it cannot read: a message naming the calling script, and status 2.
#
#   burst=$(tbf_burst 200mbit 1500) || exit 2     # "8192b"
#   burst=$(tbf_burst 1gbit 65536) || exit 2      # "66560b": a loopback's packets
tbf_burst() {
  local rate=$1 mtu=${2:-0} scale bytes
  if [[ ! "${rate,,}" =~ ^([0-9]+)(kbit|mbit|gbit)$ ]]; then  # tc's units, in any case
    echo "$(basename "$0"): rate $rate: expected a whole number with kbit, mbit or gbit (or give --burst)" >&2
    return 2
  fi
  case "${BASH_REMATCH[2]}" in kbit) scale=1000 ;; mbit) scale=1000000 ;; gbit) scale=1000000000 ;; esac
  bytes=$((10#${BASH_REMATCH[1]} * scale / 32000))  # bits/s / 8 bits per byte * 0.25 ms
  [ "$bytes" -ge 8192 ] || bytes=8192
  [ "$bytes" -ge $((mtu + 1024)) ] || bytes=$((mtu + 1024))
  echo "${bytes}b"
}
