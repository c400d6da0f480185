// Package unit runs ovfwd as its systemd unit, packaging/ovfwd.service, runs
// it: as the unit's user, with only the unit's capabilities (ambient,
// inheritable and bounding set), its resource limits, its umask and
// no_new_privs. Every namespace suite, the benches and `ovfwd lab` start
// `ovfwd run` through it, so whatever the daemon would need beyond what the
// package grants fails in the tests, not on an operator's box.
//
// The unit is parsed from the file the packages install (embedded by package
// packaging), so the tests and the package cannot drift apart. Where the
// package's system user does not exist (its postinstall script makes it; the
// tests do not run it), the daemon runs as nobody/nogroup, 65534: a non-root
// uid with only the unit's capabilities, like the real one.
//
// The daemon's files are laid out as the package lays them out: config files
// readable by the user (/etc/ovfwd is 0755, ovfwd.toml 0644), the state and
// runtime directories owned by it, mode 0750 (StateDirectory,
// RuntimeDirectory). Layout makes that tree; the harness, root, still reads
// the logs and the status and metrics sockets.
//
// What systemd adds beyond this (ProtectSystem, PrivateTmp,
// RestrictAddressFamilies, DevicePolicy and the other sandboxing lines)
// needs systemd and is not reproduced; packaging's own test checks the unit
// with systemd-analyze. A limit the unit sets above this machine's hard limit
// cannot be raised where the harness's root lacks CAP_SYS_RESOURCE (a
// container): it is applied at the hard limit and reported (Limit.Capped),
// never silently.
package unit
