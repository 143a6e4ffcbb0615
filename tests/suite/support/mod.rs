//! The suite's harness, by job: the installed tools, a registry over real
//! HTTPS, gpg, release files, Terraform, commands, request logs, and the
//! fixture the end-to-end tests publish.

pub mod browser;
pub mod cfn;
pub mod command;
pub mod dist;
pub mod edge;
pub mod fixtures;
pub mod gpg;
pub mod iam;
pub mod kill;
pub mod log;
pub mod moto;
pub mod rehearsed;
pub mod server;
pub mod terraform;
pub mod tools;

pub use command::{fails, ok, smoke_test, smoke_test_passes};
pub use dist::{provider_dist, provider_dist_of, provider_zip, write_tree};
pub use gpg::Gpg;
pub use server::Server;
pub use terraform::Terraform;
pub use tools::Tools;
