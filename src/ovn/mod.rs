//! The OVN layer shared by the drivers: who this chassis is ([`identity`]), how to reach the OVN
//! databases ([`connect`]), the Neutron and networking-bgpvpn conventions in OVN rows
//! ([`neutron`]), typed rows declared once per table ([`table`]), and the Southbound model,
//! feed and monitor-condition policies of the SB drivers ([`sb`]).

pub mod connect;
pub mod identity;
pub mod nb;
pub mod neutron;
pub mod sb;
pub mod table;
