//! `agent install|uninstall|status`: the harness files, merged into what is there.
