//! The hash maps of the agent's hot paths: the models' rows and indexes (keyed by uuids and
//! tenant-chosen names, looked up by the thousand in every computation) and the netlink
//! reconciler's full plan (every kernel object of a class, 120k at 30k exposures). foldhash,
//! seeded per process as the replica's postings: several times cheaper than SipHash on these
//! short keys.

pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`HashMap`].
pub(crate) type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
