//! `agent hook HARNESS`: read the harness's payload, decide with the boulder gates and the
//! ownership rules, answer in the harness's own format.
