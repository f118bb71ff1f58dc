//! OVS capability: cookie flows via `ovs-ofctl`, ports via `ovs-vsctl`. Filled in by the OVS
//! capability work; nothing here pretends to apply anything yet.
