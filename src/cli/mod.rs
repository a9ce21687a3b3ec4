//! Command-line definitions and dispatch.
