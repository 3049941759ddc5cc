//! The release's OCM side: each service provider published as an OCM
//! component version in an OCI registry (`component`), signed (`sign`),
//! copied to another registry (`transfer`), and read back as openmcp's
//! bootstrapper reads it (`landscape`).

pub mod component;
pub mod descriptor;
pub mod landscape;
pub mod registry;
pub mod repository;
pub mod sign;
pub mod transfer;
