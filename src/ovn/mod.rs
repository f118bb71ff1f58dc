//! The OVN layer shared by the drivers: who this chassis is ([`identity`]), how to reach the OVN
//! databases ([`connect`]), the Neutron and networking-bgpvpn conventions in OVN rows
//! ([`neutron`]), typed rows declared once per table ([`table`]), the Southbound model, feed,
//! condition policies and session of the SB drivers ([`sb`]), and the Northbound ones of the NB
//! drivers ([`nb`]).

/// The models' row and index maps, keyed by uuids and tenant-chosen names: foldhash seeded per
/// process (as the replica's postings), several times cheaper than SipHash on these short keys,
/// which every computation looks up by the thousand.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`HashMap`].
pub(crate) type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

pub mod connect;
pub mod generations;
pub mod identity;
pub mod nb;
pub mod neutron;
pub mod sb;
pub mod table;
pub mod tenant;
