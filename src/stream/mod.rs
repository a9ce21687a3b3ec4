//! A stream's life on this machine (DESIGN §3, §8): [`lifecycle`] (`stream init`, `stream
//! cleanup`), [`runloop`] (`stream run`; what its agent is told: [`prompt`]), [`status`] (the
//! dashboard), [`attention`] (refused landings, `stream retry`) and [`record`] (commits made
//! without the hooks, recorded after the fact).

pub mod attention;
pub mod lifecycle;
pub mod prompt;
pub mod record;
pub mod resolve;
pub mod rollback;
pub mod runloop;
pub mod share;
pub mod shell;
pub mod status;
