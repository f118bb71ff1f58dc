#!/usr/bin/env bash
# Records the Southbound tables the SB BGP driver reads, in the snapshot format of
# tests/fixtures/replay/<driver>/<case>/00-db.json (src/replay.rs): {"<table>": [<row as select returns it>, ...]}.
#
#   scripts/record-sb-snapshot.sh unix:/tmp/ovn-bgp-lab/ovn/ovnsb_db.sock > sb.json
set -euo pipefail
remote=${1:?usage: $0 <sb remote, e.g. unix:/path/ovnsb_db.sock>}
tables=(Chassis Port_Binding Datapath_Binding Load_Balancer Logical_DP_Group)
ops=""
for t in "${tables[@]}"; do
    ops+=",{\"op\":\"select\",\"table\":\"$t\",\"where\":[]}"
done
ovsdb-client transact "$remote" "[\"OVN_Southbound\"${ops}]" | python3 -c '
import json, sys
tables = sys.argv[1:]
results = json.load(sys.stdin)
out = {}
for table, result in zip(tables, results):
    if "error" in result:
        sys.exit(f"{table}: {result}")
    out[table] = sorted(result["rows"], key=lambda r: r["_uuid"][1])
json.dump(out, sys.stdout, indent=1, sort_keys=True)
print()
' "${tables[@]}"
