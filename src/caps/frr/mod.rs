//! FRR capability: validated template rendering and `vtysh` execution. Filled in by the FRR
//! capability work; nothing here pretends to apply anything yet.
