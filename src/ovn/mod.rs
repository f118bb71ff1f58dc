//! The OVN layer shared by the drivers: who this chassis is ([`identity`]), how to reach the OVN
//! databases ([`connect`]), the Neutron and networking-bgpvpn conventions in OVN rows
//! ([`neutron`]), typed rows declared once per table ([`table`]), the Southbound model, feed,
//! condition policies and session of the SB drivers ([`sb`]), and the Northbound ones of the NB
//! drivers ([`nb`]).

pub mod connect;
pub mod generations;
pub mod identity;
pub(crate) mod index;
pub mod nb;
pub mod neutron;
pub mod sb;
pub mod table;
pub mod tenant;
