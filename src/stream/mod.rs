//! A stream's life on this machine (DESIGN §3, §8): [`lifecycle`] (`stream init`, `stream
//! cleanup`, whether it is complete or merged), [`runloop`] (`stream run`; what its agent is
//! told: [`prompt`]; the plan's commands it runs: [`shell`]), [`status`] (the dashboard),
//! [`attention`] (refused landings, `stream retry`), [`gate`] (the review gate every landing
//! path asks), [`rollback`] (`git boulder rollback`) and
//! [`share`] (its branch pushed to a remote).

pub mod attention;
pub mod gate;
pub mod lifecycle;
pub mod prompt;
pub mod rollback;
pub mod runloop;
pub mod share;
pub mod shell;
pub mod status;
