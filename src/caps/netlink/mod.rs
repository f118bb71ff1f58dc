//! rtnetlink capability: links, addresses, rules, routes, neighbours, sysctls. Filled in by the
//! kernel capability work; nothing here pretends to apply anything yet.
