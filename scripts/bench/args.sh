# Sourced by sb_bgp_bench.sh and nb_bgp_bench.sh with their arguments: `--keep` (leave the lab
# up afterwards) into $keep, `--busy N,...` (busy-gateway exposure counts) into $busy, `--evpn`
# (the SB benchmark's busy gateway with the EVPN driver) into $evpn, `--ovn` (the NB benchmark with
# `exposing_method = ovn` and a node-local OVN cluster) into $ovn.
keep=0
busy=
evpn=
ovn=
while [ $# -gt 0 ]; do
    case $1 in
        --keep) keep=1 ;;
        --busy) busy=${2:?--busy needs a list of exposure counts, e.g. 1000,10000,30000}; shift ;;
        --evpn) evpn=--evpn ;;
        --ovn) ovn=--ovn ;;
        *) echo "unknown argument: $1 (expected --keep, --busy N,..., --evpn, --ovn)" >&2; exit 2 ;;
    esac
    shift
done
